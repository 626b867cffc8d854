// What the check functions share across checks*.cpp: the finding sink, the
// per-run context and the small helpers for messages. Internal to the
// library (not part of the C ABI).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "analysis.h"

namespace openreg::trace::checks {

// Counts every finding, keeps the first few with their message. A finding
// fails unless it only warns: a known artifact, or any finding of a
// warning-level check; strict makes every finding fail.
class Sink {
 public:
  Sink(CheckResult& r, int limit, bool strict)
      : r_(r), limit_(static_cast<size_t>(std::max(limit, 0))), strict_(strict) {}
  template <typename MakeMessage>
  void add(MakeMessage&& makeMessage, std::vector<EventRef> events, bool artifact = false) {
    bool warns = !strict_ && (artifact || r_.severity == Severity::Warning);
    ++(warns ? r_.warnings : r_.violations);
    if (r_.examples.size() < limit_) r_.examples.push_back({makeMessage(), std::move(events), artifact});
  }
  void note(std::string text) { r_.note = std::move(text); }
  void skip(std::string why) {
    r_.status = CheckResult::kSkipped;
    r_.note = std::move(why);
  }

 private:
  CheckResult& r_;
  size_t limit_;
  bool strict_;
};

// Flows in the configured categories, grouped by (category, id).
std::vector<std::vector<uint32_t>> flowGroups(const Trace& t);

struct Context {
  const Trace& t;
  const CheckOptions& options;
  // Shared by the flow checks; computed on first use (one Context per run).
  mutable std::optional<std::vector<std::vector<uint32_t>>> flows;
  const std::vector<std::vector<uint32_t>>& flowGroups() const {
    if (!flows) flows = checks::flowGroups(t);
    return *flows;
  }
};

inline EventRef sliceRef(uint32_t i) { return {EventRef::kSlice, i}; }
inline EventRef flowRef(uint32_t i) { return {EventRef::kFlow, i}; }

inline std::string us(int64_t ns) { return formatUs(ns) + " us"; }

// Built by appending: GCC 12 warns falsely (-Wrestrict) on "\"" + std::string.
inline std::string nameOf(const Trace& t, const Slice& s) {
  if (s.name == kNoString) return "<unnamed>";
  std::string_view name = t.str(s.name);
  std::string out;
  out.reserve(name.size() + 2);
  out.append(1, '"').append(name).append(1, '"');
  return out;
}

// Kineto's only synchronisation category, which openreg writes too.
inline constexpr std::string_view kSyncCategory = "cuda_sync";
inline bool isSyncRow(const Trace& t, const Slice& s) { return t.str(s.cat) == kSyncCategory; }

// One row of the check table: what checkTable() lists and the function
// that runCheck() runs.
struct CheckEntry {
  CheckInfo info;
  void (*run)(const Context&, Sink&);
  bool needsValidJson;
};

// The synchronisation rules (checks_sync.cpp), after the general ones.
std::vector<CheckEntry> syncEntries();

}  // namespace openreg::trace::checks

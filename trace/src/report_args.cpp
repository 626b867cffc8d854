#include "report_args.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "json_reader.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

// Per-event unique values: keeping them would make every args text distinct.
constexpr std::array<std::string_view, 10> kUniqueKeys{
    "External id", "correlation",      "Sequence number", "Ev Idx",        "Record function id",
    "Python id",   "Python parent id", "Fwd thread id",   "Python thread", "Addr"};

bool isUnique(std::string_view key) {
  return std::find(kUniqueKeys.begin(), kUniqueKeys.end(), key) != kUniqueKeys.end();
}

// Copies one JSON value as compact text.
void copyValue(JsonReader& r, std::string& out, int depth = 0) {
  switch (r.peekKind()) {
    case JsonKind::String:
      common::appendJsonString(out, r.readString());
      return;
    case JsonKind::Number:
      out += r.readNumber();
      return;
    case JsonKind::True:
    case JsonKind::False:
      out += r.readBool() ? "true" : "false";
      return;
    case JsonKind::Null:
      r.readNull();
      out += "null";
      return;
    case JsonKind::Array: {
      if (depth > 16) {
        r.skipValue();
        out += "null";
        return;
      }
      r.beginArray();
      out += '[';
      bool first = true;
      while (r.nextElement()) {
        if (!first) out += ',';
        first = false;
        copyValue(r, out, depth + 1);
      }
      out += ']';
      return;
    }
    case JsonKind::Object: {
      if (depth > 16) {
        r.skipValue();
        out += "null";
        return;
      }
      r.beginObject();
      out += '{';
      bool first = true;
      std::string_view key;
      while (r.nextKey(key)) {
        if (!first) out += ',';
        first = false;
        common::appendJsonString(out, key);
        out += ':';
        copyValue(r, out, depth + 1);
      }
      out += '}';
      return;
    }
  }
}

class Interner {
 public:
  explicit Interner(std::vector<std::string>& texts) : texts_(texts) {}
  uint32_t intern(const std::string& s) {
    if (s.empty()) return 0;
    auto [it, inserted] = ids_.emplace(s, static_cast<uint32_t>(texts_.size()));
    if (inserted) texts_.push_back(s);
    return it->second;
  }

 private:
  std::vector<std::string>& texts_;
  std::unordered_map<std::string, uint32_t> ids_;
};

struct EventFields {
  std::string args, dims;
  bool memory = false;
  EventArgs::MemoryExtra extra;
};

void readArgsObject(JsonReader& r, EventFields& f) {
  if (r.peekKind() != JsonKind::Object) {
    r.skipValue();
    return;
  }
  r.beginObject();
  f.args += '{';
  bool first = true;
  std::string_view key;
  std::string value;
  while (r.nextKey(key)) {
    const std::string k(key);
    value.clear();
    copyValue(r, value);
    if (k == "Total Reserved") parseInt64(value, f.extra.reserved);
    if (k == "Addr") f.extra.hasAddr = parseInt64(value, f.extra.addr);
    if (k == "Input Dims") f.dims = value;
    if (isUnique(k)) continue;
    if (!first) f.args += ',';
    first = false;
    common::appendJsonString(f.args, k);
    f.args += ':';
    f.args += value;
  }
  f.args += '}';
  if (first) f.args.clear();  // {} is no args
}

void readEvent(JsonReader& r, EventFields& f) {
  if (r.peekKind() != JsonKind::Object) {
    r.skipValue();
    return;
  }
  r.beginObject();
  std::string_view key;
  while (r.nextKey(key)) {
    if (key == "args") {
      readArgsObject(r, f);
    } else if (key == "name" && r.peekKind() == JsonKind::String) {
      f.memory = r.readString() == "[memory]";
    } else {
      r.skipValue();
    }
  }
}

}  // namespace

EventArgs readEventArgs(const std::string& path, uint64_t eventCount) {
  EventArgs out;
  out.argsOf.assign(eventCount, 0);
  out.dimsOf.assign(eventCount, 0);
  Interner args(out.texts);
  // Input Dims share the table: their texts are short and repeat.
  try {
    JsonReader r(openFileSource(path));
    if (r.peekKind() != JsonKind::Object) return out;
    r.beginObject();
    std::string_view key;
    while (r.nextKey(key)) {
      if (key != "traceEvents" || r.peekKind() != JsonKind::Array) {
        r.skipValue();
        continue;
      }
      r.beginArray();
      uint32_t index = 0;
      EventFields f;
      while (r.nextElement()) {
        f.args.clear();
        f.dims.clear();
        f.memory = false;
        f.extra = {};
        readEvent(r, f);
        if (index < eventCount) {
          out.argsOf[index] = args.intern(f.args);
          out.dimsOf[index] = args.intern(f.dims);
          if (f.memory) out.memory[index] = f.extra;
        }
        ++index;
      }
    }
  } catch (const JsonError&) {
    // The model kept the events before the error; so do we.
  } catch (const IoError&) {}
  return out;
}

}  // namespace openreg::trace

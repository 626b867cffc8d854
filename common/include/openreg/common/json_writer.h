// JsonWriter: builds one JSON document in memory. Commas and the colon after a
// key are placed by the writer, so callers only say what comes next:
//
//   JsonWriter w;
//   w.beginObject().field("name", "aten::add").key("dims").beginArray()
//    .value(2).value(3).endArray().endObject();
//   w.str();  // {"name":"aten::add","dims":[2,3]}
//
// Strings are escaped as RFC 8259 requires: '"', '\\' and every byte below
// 0x20 (as \n, \r, \t, \b, \f or \u00XX); all other bytes, UTF-8 included,
// pass through unchanged. NaN and infinities, which JSON cannot hold, are
// written as null.
//
// Contract: the caller nests correctly (every begin has its end, a key is
// followed by exactly one value, keys only inside objects). Misuse is not
// detected in release builds beyond what depth() and complete() report.
// A JsonWriter is not thread-safe; use one per thread. It never throws
// except std::bad_alloc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace openreg::common {

class JsonWriter {
 public:
  // Compact: {"a":1,"b":[2,3]}. Spaced: {"a": 1, "b": [2, 3]}, the layout
  // Kineto gives the args it writes (and Python's json.dumps).
  enum class Layout { Compact, Spaced };
  explicit JsonWriter(Layout layout = Layout::Compact) : spaced_(layout == Layout::Spaced) {}

  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  // A key inside an object; the next call writes its value.
  JsonWriter& key(std::string_view name);

  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(const std::string& text) { return value(std::string_view(text)); }
  JsonWriter& value(int64_t number);
  JsonWriter& value(uint64_t number);
  JsonWriter& value(int number) { return value(static_cast<int64_t>(number)); }
  JsonWriter& value(long long number) { return value(static_cast<int64_t>(number)); }
  JsonWriter& value(unsigned number) { return value(static_cast<uint64_t>(number)); }
  JsonWriter& value(unsigned long long number) { return value(static_cast<uint64_t>(number)); }
  // Shortest text that reads back as the same double.
  JsonWriter& value(double number);
  JsonWriter& value(bool flag);
  JsonWriter& null();
  // A double with exactly `decimals` digits after the point (as Kineto writes
  // microsecond timestamps: decimals = 3).
  JsonWriter& valueFixed(double number, int decimals);

  // A key and its value in one call.
  template <typename T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

  // Open containers; 0 once the document is closed.
  size_t depth() const { return firstInContainer_.size(); }
  // True when something was written and every container is closed.
  bool complete() const { return !out_.empty() && depth() == 0 && !afterKey_; }

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void beforeValue();

  bool spaced_ = false;
  std::string out_;
  std::vector<bool> firstInContainer_;  // per open container: nothing written yet
  bool afterKey_ = false;
};

// Appends `text` as a quoted, escaped JSON string.
void appendJsonString(std::string& out, std::string_view text);

}  // namespace openreg::common

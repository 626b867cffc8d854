#include "openreg/common/json_writer.h"

#include <charconv>
#include <cmath>

namespace openreg::common {

void appendJsonString(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    switch (byte) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out.push_back(kHex[byte >> 4]);
          out.push_back(kHex[byte & 0xF]);
        } else {
          out.push_back(ch);  // UTF-8 and DEL are valid in a JSON string
        }
    }
  }
  out.push_back('"');
}

void JsonWriter::beforeValue() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (!firstInContainer_.empty()) {
    if (!firstInContainer_.back()) out_.append(spaced_ ? ", " : ",");
    firstInContainer_.back() = false;
  }
}

JsonWriter& JsonWriter::beginObject() {
  beforeValue();
  out_.push_back('{');
  firstInContainer_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  out_.push_back('}');
  if (!firstInContainer_.empty()) firstInContainer_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  beforeValue();
  out_.push_back('[');
  firstInContainer_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  out_.push_back(']');
  if (!firstInContainer_.empty()) firstInContainer_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  beforeValue();
  appendJsonString(out_, name);
  out_.append(spaced_ ? ": " : ":");
  afterKey_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view text) {
  beforeValue();
  appendJsonString(out_, text);
  return *this;
}

JsonWriter& JsonWriter::value(int64_t number) {
  beforeValue();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, number);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t number) {
  beforeValue();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, number);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::value(double number) {
  beforeValue();
  if (!std::isfinite(number)) {
    out_ += "null";
    return *this;
  }
  // to_chars ignores the C locale, unlike printf.
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, number);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::valueFixed(double number, int decimals) {
  beforeValue();
  if (!std::isfinite(number)) {
    out_ += "null";
    return *this;
  }
  char buf[352];  // the longest fixed double (1e308 with 17 decimals) fits
  if (decimals < 0) decimals = 0;
  if (decimals > 17) decimals = 17;
  auto r = std::to_chars(buf, buf + sizeof buf, number, std::chars_format::fixed, decimals);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) {
  beforeValue();
  out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  beforeValue();
  out_ += "null";
  return *this;
}

}  // namespace openreg::common

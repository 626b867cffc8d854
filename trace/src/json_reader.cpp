#include "json_reader.h"

#include <zlib.h>

#include <cctype>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

namespace openreg::trace {

JsonError::JsonError(uint64_t offset, const std::string& message)
    : std::runtime_error("invalid JSON at byte " + std::to_string(offset) + ": " + message),
      offset_(offset),
      reason_(message) {}

namespace {

bool hasGzipMagic(const unsigned char* p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

class FdSource final : public ByteSource {
 public:
  FdSource(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~FdSource() override { ::close(fd_); }
  size_t read(char* dst, size_t capacity) override {
    for (;;) {
      ssize_t n = ::read(fd_, dst, capacity);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) throw IoError("cannot read " + path_ + ": " + std::strerror(errno));
    }
  }

 private:
  int fd_;
  std::string path_;
};

// zlib's inflate over any upstream source, so files and buffers share it.
class GzipSource final : public ByteSource {
 public:
  GzipSource(std::unique_ptr<ByteSource> upstream, std::string what)
      : upstream_(std::move(upstream)), what_(std::move(what)), in_(size_t{1} << 18) {
    std::memset(&z_, 0, sizeof z_);
    // 16 + MAX_WBITS: expect a gzip header; concatenated members are handled below.
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) throw IoError("zlib initialisation failed");
  }
  ~GzipSource() override { inflateEnd(&z_); }

  size_t read(char* dst, size_t capacity) override {
    if (done_) return 0;
    z_.next_out = reinterpret_cast<Bytef*>(dst);
    z_.avail_out = static_cast<uInt>(capacity > (1u << 30) ? (1u << 30) : capacity);
    const uInt wanted = z_.avail_out;
    while (z_.avail_out == wanted) {
      if (z_.avail_in == 0) {
        size_t n = upstream_->read(in_.data(), in_.size());
        if (n == 0) {
          if (memberOpen_) throw IoError(what_ + ": truncated gzip stream");
          done_ = true;
          break;
        }
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(n);
      }
      memberOpen_ = true;
      int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        memberOpen_ = false;
        inflateReset(&z_);
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw IoError(what_ + ": corrupt gzip stream (" + (z_.msg ? z_.msg : "zlib error") + ")");
      }
    }
    return wanted - z_.avail_out;
  }

 private:
  std::unique_ptr<ByteSource> upstream_;
  std::string what_;
  std::vector<char> in_;
  z_stream z_;
  bool memberOpen_ = false;
  bool done_ = false;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(const char* data, size_t size) : data_(data), left_(size) {}
  size_t read(char* dst, size_t capacity) override {
    size_t n = left_ < capacity ? left_ : capacity;
    std::memcpy(dst, data_, n);
    data_ += n;
    left_ -= n;
    return n;
  }

 private:
  const char* data_;
  size_t left_;
};

// Replays a few already-read bytes before the rest of a source, so that the
// gzip sniff does not need a seekable input.
class PrefixedSource final : public ByteSource {
 public:
  PrefixedSource(std::string prefix, std::unique_ptr<ByteSource> rest)
      : prefix_(std::move(prefix)), rest_(std::move(rest)) {}
  size_t read(char* dst, size_t capacity) override {
    if (used_ < prefix_.size()) {
      size_t n = std::min(capacity, prefix_.size() - used_);
      std::memcpy(dst, prefix_.data() + used_, n);
      used_ += n;
      return n;
    }
    return rest_->read(dst, capacity);
  }

 private:
  std::string prefix_;
  size_t used_ = 0;
  std::unique_ptr<ByteSource> rest_;
};

std::unique_ptr<ByteSource> maybeGunzip(std::unique_ptr<ByteSource> raw, const std::string& what) {
  char head[2];
  size_t got = 0;
  while (got < 2) {
    size_t n = raw->read(head + got, 2 - got);
    if (n == 0) break;
    got += n;
  }
  auto replay = std::make_unique<PrefixedSource>(std::string(head, got), std::move(raw));
  if (hasGzipMagic(reinterpret_cast<unsigned char*>(head), got))
    return std::make_unique<GzipSource>(std::move(replay), what);
  return replay;
}

inline bool isSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
inline bool isDigit(char c) { return c >= '0' && c <= '9'; }
inline bool isNumberChar(char c) { return isDigit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'; }

// JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool validNumber(std::string_view s) {
  size_t i = 0, n = s.size();
  if (i < n && s[i] == '-') ++i;
  if (i >= n) return false;
  if (s[i] == '0') {
    ++i;
  } else if (s[i] >= '1' && s[i] <= '9') {
    while (i < n && isDigit(s[i])) ++i;
  } else {
    return false;
  }
  if (i < n && s[i] == '.') {
    ++i;
    size_t start = i;
    while (i < n && isDigit(s[i])) ++i;
    if (i == start) return false;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    size_t start = i;
    while (i < n && isDigit(s[i])) ++i;
    if (i == start) return false;
  }
  return i == n;
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Length of the UTF-8 sequence that `lead` starts, 0 if it cannot start one.
int utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Second-byte ranges exclude overlong forms, surrogates and > U+10FFFF.
bool validSecondByte(unsigned char lead, unsigned char b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return b >= 0x80 && b <= 0xBF;
}

}  // namespace

std::unique_ptr<ByteSource> openFileSource(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open " + path + ": " + std::strerror(errno));
  return maybeGunzip(std::make_unique<FdSource>(fd, path), path);
}

std::unique_ptr<ByteSource> openMemorySource(const void* data, size_t size) {
  return maybeGunzip(std::make_unique<MemorySource>(static_cast<const char*>(data), size), "buffer");
}

JsonReader::JsonReader(std::unique_ptr<ByteSource> source, size_t bufferSize)
    : source_(std::move(source)), buffer_(bufferSize == 0 ? 1 : bufferSize) {
  bufBegin_ = pos_ = end_ = buffer_.data();
}

void JsonReader::fail(const std::string& what) const { throw JsonError(offset(), what); }

bool JsonReader::refill() {
  if (eof_) return false;
  consumed_ += static_cast<uint64_t>(end_ - bufBegin_);
  size_t n = source_->read(buffer_.data(), buffer_.size());
  bufBegin_ = pos_ = buffer_.data();
  end_ = bufBegin_ + n;
  if (n == 0) eof_ = true;
  return n != 0;
}

int JsonReader::peekNonspaceRefill() {
  for (;;) {
    if (!refill()) return -1;
    while (pos_ < end_) {
      char c = *pos_;
      if (!isSpace(c)) return static_cast<unsigned char>(c);
      ++pos_;
    }
  }
}

bool JsonReader::atEnd() { return peekNonspace() < 0; }

bool JsonReader::consumeIf(char c) {
  if (peekNonspace() == static_cast<unsigned char>(c)) {
    ++pos_;
    return true;
  }
  return false;
}

void JsonReader::expect(char c) {
  int got = peekNonspace();
  if (got != static_cast<unsigned char>(c)) {
    if (got < 0) fail(std::string("expected '") + c + "' but the input ended");
    fail(std::string("expected '") + c + "' but found '" + static_cast<char>(got) + "'");
  }
  ++pos_;
}

JsonKind JsonReader::peekKind() {
  int c = peekNonspace();
  switch (c) {
    case '"':
      return JsonKind::String;
    case '{':
      return JsonKind::Object;
    case '[':
      return JsonKind::Array;
    case 't':
      return JsonKind::True;
    case 'f':
      return JsonKind::False;
    case 'n':
      return JsonKind::Null;
    case -1:
      fail("expected a value but the input ended");
    default:
      if (c == '-' || isDigit(static_cast<char>(c))) return JsonKind::Number;
      fail(std::string("unexpected character '") + static_cast<char>(c) + "'");
  }
}

std::string_view JsonReader::readString() {
  expect('"');
  const char* start = pos_;
  const char* p = pos_;
  // Fast path: plain ASCII inside the current buffer needs no copy.
  while (p < end_) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"') {
      pos_ = p + 1;
      return std::string_view(start, static_cast<size_t>(p - start));
    }
    if (c == '\\' || c < 0x20) break;
    if (c >= 0x80) {
      int len = utf8Length(c);
      if (len == 0 || end_ - p < len) break;  // invalid, or crosses the buffer: slow path decides
      if (!validSecondByte(c, static_cast<unsigned char>(p[1]))) break;
      bool ok = true;
      for (int k = 2; k < len; ++k)
        if ((static_cast<unsigned char>(p[k]) & 0xC0) != 0x80) ok = false;
      if (!ok) break;
      p += len;
      continue;
    }
    ++p;
  }
  pos_ = p;
  return readStringSlow(start);
}

std::string_view JsonReader::readStringSlow(const char* start) {
  scratch_.assign(start, static_cast<size_t>(pos_ - start));
  for (;;) {
    if (pos_ == end_ && !refill()) fail("unterminated string");
    unsigned char c = static_cast<unsigned char>(*pos_);
    if (c == '"') {
      ++pos_;
      return scratch_;
    }
    if (c == '\\') {
      ++pos_;
      appendEscape();
    } else if (c < 0x20) {
      fail("control character in string");
    } else if (c >= 0x80) {
      ++pos_;
      appendUtf8Continuation(c);
    } else {
      scratch_.push_back(static_cast<char>(c));
      ++pos_;
    }
  }
}

void JsonReader::appendUtf8Continuation(unsigned char lead) {
  int len = utf8Length(lead);
  if (len == 0) fail("invalid UTF-8 in string");
  scratch_.push_back(static_cast<char>(lead));
  for (int k = 1; k < len; ++k) {
    if (pos_ == end_ && !refill()) fail("unterminated string");
    unsigned char b = static_cast<unsigned char>(*pos_);
    bool ok = k == 1 ? validSecondByte(lead, b) : (b & 0xC0) == 0x80;
    if (!ok) fail("invalid UTF-8 in string");
    scratch_.push_back(static_cast<char>(b));
    ++pos_;
  }
}

void JsonReader::appendEscape() {
  auto next = [this]() -> char {
    if (pos_ == end_ && !refill()) fail("unterminated escape");
    return *pos_++;
  };
  auto hex4 = [&]() -> uint32_t {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char h = next();
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<uint32_t>(h - 'A' + 10);
      else
        fail("bad \\u escape");
    }
    return v;
  };
  char e = next();
  switch (e) {
    case '"':
      scratch_.push_back('"');
      break;
    case '\\':
      scratch_.push_back('\\');
      break;
    case '/':
      scratch_.push_back('/');
      break;
    case 'b':
      scratch_.push_back('\b');
      break;
    case 'f':
      scratch_.push_back('\f');
      break;
    case 'n':
      scratch_.push_back('\n');
      break;
    case 'r':
      scratch_.push_back('\r');
      break;
    case 't':
      scratch_.push_back('\t');
      break;
    case 'u': {
      uint32_t cp = hex4();
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        // A high surrogate must be followed by \uDC00-\uDFFF.
        if (next() != '\\' || next() != 'u') fail("lone surrogate in \\u escape");
        uint32_t low = hex4();
        if (low < 0xDC00 || low > 0xDFFF) fail("lone surrogate in \\u escape");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        fail("lone surrogate in \\u escape");
      }
      appendUtf8(scratch_, cp);
      break;
    }
    default:
      fail(std::string("bad escape '\\") + e + "'");
  }
}

std::string_view JsonReader::readNumber() {
  int c = peekNonspace();
  if (c != '-' && !(c >= '0' && c <= '9')) fail("expected a number");
  const char* start = pos_;
  const char* p = pos_;
  while (p < end_ && isNumberChar(*p)) ++p;
  if (p < end_) {
    std::string_view text(start, static_cast<size_t>(p - start));
    if (!validNumber(text)) fail("malformed number '" + std::string(text) + "'");
    pos_ = p;
    return text;
  }
  return readNumberSlow();
}

std::string_view JsonReader::readNumberSlow() {
  numberScratch_.clear();
  for (;;) {
    if (pos_ == end_ && !refill()) break;
    if (!isNumberChar(*pos_)) break;
    numberScratch_.push_back(*pos_++);
    if (numberScratch_.size() > 4096) fail("number too long");
  }
  if (!validNumber(numberScratch_)) fail("malformed number '" + numberScratch_ + "'");
  return numberScratch_;
}

void JsonReader::expectLiteral(std::string_view word) {
  for (char w : word) {
    if (pos_ == end_ && !refill()) fail("unexpected end of input in literal");
    if (*pos_ != w) fail("invalid literal");
    ++pos_;
  }
  // "trueX" must not pass as true.
  if (pos_ == end_) refill();
  if (pos_ < end_ && (std::isalnum(static_cast<unsigned char>(*pos_)) || *pos_ == '_')) fail("invalid literal");
}

bool JsonReader::readBool() {
  JsonKind k = peekKind();
  if (k == JsonKind::True) {
    expectLiteral("true");
    return true;
  }
  if (k == JsonKind::False) {
    expectLiteral("false");
    return false;
  }
  fail("expected true or false");
}

void JsonReader::readNull() {
  if (peekKind() != JsonKind::Null) fail("expected null");
  expectLiteral("null");
}

void JsonReader::pushContainer(uint8_t kind) {
  if (containers_.size() >= static_cast<size_t>(kMaxDepth)) fail("nesting too deep");
  containers_.push_back(kind);
}

void JsonReader::beginObject() {
  expect('{');
  pushContainer(kObjectBit);
}

bool JsonReader::nextKey(std::string_view& key) {
  int c = peekNonspace();
  if (c == '}') {
    ++pos_;
    containers_.pop_back();
    return false;
  }
  if (containers_.back() & kStartedBit) {
    if (c != ',') fail("expected ',' or '}' in object");
    ++pos_;
    c = peekNonspace();
  }
  containers_.back() |= kStartedBit;
  if (c != '"') fail("expected a string key in object");
  key = readString();
  // The ':' may sit in the next buffer; keep the key alive across the refill.
  const char* p = pos_;
  while (p < end_ && isSpace(*p)) ++p;
  if (p == end_ && key.data() != scratch_.data()) {
    scratch_.assign(key);
    key = scratch_;
  }
  expect(':');
  return true;
}

void JsonReader::beginArray() {
  expect('[');
  pushContainer(0);
}

bool JsonReader::nextElement() {
  int c = peekNonspace();
  if (c == ']') {
    ++pos_;
    containers_.pop_back();
    return false;
  }
  if (containers_.back() & kStartedBit) {
    if (c != ',') fail("expected ',' or ']' in array");
    ++pos_;
    if (peekNonspace() == ']') fail("trailing comma in array");
  }
  containers_.back() |= kStartedBit;
  return true;
}

void JsonReader::skipValue() {
  // Iterative, so deep nesting cannot overflow the C++ stack.
  const size_t base = containers_.size();
  std::string_view key;
  for (;;) {
    switch (peekKind()) {
      case JsonKind::String:
        readString();
        break;
      case JsonKind::Number:
        readNumber();
        break;
      case JsonKind::True:
        expectLiteral("true");
        break;
      case JsonKind::False:
        expectLiteral("false");
        break;
      case JsonKind::Null:
        expectLiteral("null");
        break;
      case JsonKind::Object:
        beginObject();
        if (nextKey(key)) continue;
        break;
      case JsonKind::Array:
        beginArray();
        if (nextElement()) continue;
        break;
    }
    // One value is complete: move to the next member, closing finished containers.
    for (;;) {
      if (containers_.size() == base) return;
      bool more = (containers_.back() & kObjectBit) ? nextKey(key) : nextElement();
      if (more) break;
    }
  }
}

bool parseInt64(std::string_view text, int64_t& out) {
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && text[i] == '-') {
    negative = true;
    ++i;
  }
  if (i == text.size()) return false;
  // Accumulate negatively so that INT64_MIN parses too.
  int64_t value = 0;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (!isDigit(c)) return false;
    int digit = c - '0';
    if (value < (INT64_MIN + digit) / 10) return false;
    value = value * 10 - digit;
  }
  if (!negative) {
    if (value == INT64_MIN) return false;
    value = -value;
  }
  out = value;
  return true;
}

bool parseUsToNs(std::string_view text, int64_t& out) {
  size_t i = 0, n = text.size();
  bool negative = i < n && text[i] == '-';
  if (negative) ++i;
  int64_t whole = 0;
  size_t digits = 0;
  for (; i < n && isDigit(text[i]); ++i, ++digits) {
    if (whole > (INT64_MAX / 1000 - 9) / 10) return false;
    whole = whole * 10 + (text[i] - '0');
  }
  if (digits == 0) return false;
  int64_t frac = 0;
  if (i < n && text[i] == '.') {
    ++i;
    int kept = 0;
    bool roundUp = false;
    for (; i < n && isDigit(text[i]); ++i) {
      if (kept < 3) {
        frac = frac * 10 + (text[i] - '0');
        ++kept;
      } else if (kept == 3) {
        roundUp = text[i] >= '5';
        kept = 4;
      }
    }
    for (; kept < 3; ++kept) frac *= 10;
    if (roundUp) ++frac;
  }
  if (i < n) {
    // An exponent: rare in traces, so exactness gives way to double.
    double v = parseDouble(text) * 1000.0;
    if (!std::isfinite(v) || std::fabs(v) > 9.0e18) return false;
    out = static_cast<int64_t>(std::llround(v));
    return true;
  }
  int64_t ns = whole * 1000 + frac;
  out = negative ? -ns : ns;
  return true;
}

double parseDouble(std::string_view text) {
  // from_chars ignores the C locale, unlike strtod.
  double v = 0.0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

}  // namespace openreg::trace

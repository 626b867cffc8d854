// A streaming, validating JSON pull reader. It holds one buffer of input at a
// time, so a trace of any size is read in constant memory; strings and
// numbers come back as views that stay valid until the next call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace openreg::trace {

// Malformed JSON; offset counts bytes of the decompressed stream.
class JsonError : public std::runtime_error {
 public:
  JsonError(uint64_t offset, const std::string& message);
  uint64_t offset() const { return offset_; }
  const std::string& reason() const { return reason_; }

 private:
  uint64_t offset_;
  std::string reason_;
};

// The input could not be read (missing file, corrupt gzip stream).
class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Copies up to `capacity` bytes into `dst`; returns 0 only at the end.
  virtual size_t read(char* dst, size_t capacity) = 0;
};

// A file, transparently gunzipped when it starts with the gzip magic bytes.
std::unique_ptr<ByteSource> openFileSource(const std::string& path);
// An in-memory document; gzip is detected the same way. `data` must outlive the source.
std::unique_ptr<ByteSource> openMemorySource(const void* data, size_t size);

enum class JsonKind { String, Number, Object, Array, True, False, Null };

class JsonReader {
 public:
  static constexpr size_t kDefaultBufferSize = size_t{1} << 20;
  static constexpr int kMaxDepth = 4096;

  explicit JsonReader(std::unique_ptr<ByteSource> source, size_t bufferSize = kDefaultBufferSize);

  // Kind of the next value, after whitespace. Fails at end of input or on a
  // character that cannot start a value.
  JsonKind peekKind();
  // True when only whitespace remains.
  bool atEnd();
  // Consumes `c` if it is the next non-space character.
  bool consumeIf(char c);
  void expect(char c);

  std::string_view readString();
  // The validated text of a number.
  std::string_view readNumber();
  bool readBool();
  void readNull();
  // Skips (and validates) one value of any kind.
  void skipValue();

  // Object iteration: call beginObject(), then nextKey() until it returns
  // false; read or skip exactly one value after each key.
  void beginObject();
  bool nextKey(std::string_view& key);
  void beginArray();
  bool nextElement();

  uint64_t offset() const { return consumed_ + static_cast<uint64_t>(pos_ - bufBegin_); }
  [[noreturn]] void fail(const std::string& what) const;

 private:
  // The next non-space byte without consuming it; -1 at end of input.
  // Inline: it runs before every token.
  int peekNonspace() {
    while (pos_ < end_) {
      char c = *pos_;
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return static_cast<unsigned char>(c);
      ++pos_;
    }
    return peekNonspaceRefill();
  }
  int peekNonspaceRefill();
  bool refill();
  std::string_view readStringSlow(const char* start);
  void appendEscape();
  void appendUtf8Continuation(unsigned char lead);
  std::string_view readNumberSlow();
  void expectLiteral(std::string_view word);
  void pushContainer(uint8_t kind);

  std::unique_ptr<ByteSource> source_;
  std::vector<char> buffer_;
  const char* bufBegin_ = nullptr;
  const char* pos_ = nullptr;
  const char* end_ = nullptr;
  uint64_t consumed_ = 0;  // bytes before bufBegin_
  bool eof_ = false;
  std::string scratch_;
  std::string numberScratch_;
  // One entry per open object/array.
  static constexpr uint8_t kObjectBit = 1;
  static constexpr uint8_t kStartedBit = 2;  // a member was already read
  std::vector<uint8_t> containers_;
};

// Integer text (no fraction or exponent) that fits int64.
bool parseInt64(std::string_view text, int64_t& out);
// Microseconds as written by Kineto ("123.456") to integer nanoseconds;
// exact for up to 3 decimals, rounded beyond; exponents go through double.
bool parseUsToNs(std::string_view text, int64_t& out);
double parseDouble(std::string_view text);

}  // namespace openreg::trace

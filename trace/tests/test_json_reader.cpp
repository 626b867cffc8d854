#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "json_reader.h"

namespace openreg::trace {
namespace {

// `text` must outlive the reader: the source reads it in place.
JsonReader readerFor(const std::string& text, size_t buffer = JsonReader::kDefaultBufferSize) {
  return JsonReader(openMemorySource(text.data(), text.size()), buffer);
}

// Renders any value back to a canonical string, exercising every token kind.
std::string canonical(JsonReader& r) {
  switch (r.peekKind()) {
    case JsonKind::String:
      return "s(" + std::string(r.readString()) + ")";
    case JsonKind::Number:
      return "n(" + std::string(r.readNumber()) + ")";
    case JsonKind::True:
    case JsonKind::False:
      return r.readBool() ? "true" : "false";
    case JsonKind::Null:
      r.readNull();
      return "null";
    case JsonKind::Object: {
      std::string out = "{";
      r.beginObject();
      std::string_view key;
      while (r.nextKey(key)) {
        out += std::string(key) + ":";
        out += canonical(r) + ";";
      }
      return out + "}";
    }
    case JsonKind::Array: {
      std::string out = "[";
      r.beginArray();
      while (r.nextElement()) out += canonical(r) + ";";
      return out + "]";
    }
  }
  return "?";
}

std::string parseError(const std::string& text) {
  try {
    auto r = readerFor(text);
    r.skipValue();
    if (!r.atEnd()) return "trailing";
    return "";
  } catch (const JsonError& e) {
    return e.reason();
  }
}

const std::string kDocument =
    R"( {"a": [1, -2.5e3, 0, true, false, null], "key with \"quotes\"": "line\nbreak \u00e9 \ud83d\ude00",
        "nested": {"deep": [[[]], {}], "x": "caf\u00e9 caf)"
    "\xC3\xA9"
    R"("}, "long": "0123456789abcdefghijklmnopqrstuvwxyz"} )";

TEST(JsonReader, ReadsEveryTokenKind) {
  auto r = readerFor(kDocument);
  std::string got = canonical(r);
  EXPECT_TRUE(r.atEnd());
  EXPECT_EQ(got,
            "{a:[n(1);n(-2.5e3);n(0);true;false;null;];key with \"quotes\":s(line\nbreak \xC3\xA9 \xF0\x9F\x98\x80);"
            "nested:{deep:[[[];];{};];x:s(caf\xC3\xA9 caf\xC3\xA9);};long:s(0123456789abcdefghijklmnopqrstuvwxyz);}");
}

TEST(JsonReader, ResultDoesNotDependOnBufferSize) {
  // Tiny buffers split every token across refills.
  auto whole = readerFor(kDocument);
  const std::string expected = canonical(whole);
  for (size_t buffer = 1; buffer <= 19; ++buffer) {
    auto r = readerFor(kDocument, buffer);
    EXPECT_EQ(canonical(r), expected) << "buffer size " << buffer;
    EXPECT_TRUE(r.atEnd());
  }
}

TEST(JsonReader, SkipValueValidatesAndStopsAfterTheValue) {
  const std::string text = R"([{"a":[1,{"b":"c"}],"d":{}}, 42])";
  for (size_t buffer : {size_t{1}, size_t{3}, JsonReader::kDefaultBufferSize}) {
    auto r = readerFor(text, buffer);
    r.beginArray();
    ASSERT_TRUE(r.nextElement());
    r.skipValue();
    ASSERT_TRUE(r.nextElement());
    EXPECT_EQ(r.readNumber(), "42");
    EXPECT_FALSE(r.nextElement());
    EXPECT_TRUE(r.atEnd());
  }
}

TEST(JsonReader, RejectsMalformedDocuments) {
  EXPECT_EQ(parseError(R"({"a":1})"), "");
  EXPECT_NE(parseError(R"([1,])"), "");
  EXPECT_NE(parseError(R"({"a":1,})"), "");
  EXPECT_NE(parseError(R"({"a" 1})"), "");
  EXPECT_NE(parseError(R"({a:1})"), "");
  EXPECT_NE(parseError(R"(["abc)"), "");
  EXPECT_NE(parseError(R"([tru])"), "");
  EXPECT_NE(parseError(R"([truex])"), "");
  EXPECT_NE(parseError(R"([01])"), "");
  EXPECT_NE(parseError(R"([1.])"), "");
  EXPECT_NE(parseError(R"([-])"), "");
  EXPECT_NE(parseError(R"([.5])"), "");
  EXPECT_NE(parseError(R"([1e])"), "");
  EXPECT_NE(parseError("[\"tab\there\"]"), "");
  EXPECT_NE(parseError(R"(["\x"])"), "");
  EXPECT_NE(parseError(R"(["\ud800"])"), "");
  EXPECT_NE(parseError("[\"\xC3\"]"), "");      // truncated UTF-8
  EXPECT_NE(parseError("[\"\xC0\xAF\"]"), "");  // overlong
  EXPECT_NE(parseError(R"([1] [2])"), "");
  EXPECT_NE(parseError(R"({"a":1]})"), "");
  EXPECT_NE(parseError(""), "");
  EXPECT_NE(parseError(std::string(5000, '[') + std::string(5000, ']')), "");  // too deep
}

TEST(JsonReader, ErrorOffsetPointsAtTheProblem) {
  const std::string text = R"({"a": [1, 2,, 3]})";
  try {
    auto r = readerFor(text);
    r.skipValue();
    FAIL() << "no error";
  } catch (const JsonError& e) {
    EXPECT_EQ(e.offset(), 12u);
  }
}

TEST(JsonReader, KeyStaysValidWhenTheColonIsInTheNextBuffer) {
  const std::string text = R"({"traceEvents"     :  1, "b" :2})";
  for (size_t buffer = 1; buffer < text.size(); ++buffer) {
    auto r = readerFor(text, buffer);
    r.beginObject();
    std::string_view key;
    ASSERT_TRUE(r.nextKey(key));
    EXPECT_EQ(key, "traceEvents") << "buffer " << buffer;
    r.skipValue();
    ASSERT_TRUE(r.nextKey(key));
    EXPECT_EQ(key, "b") << "buffer " << buffer;
    r.skipValue();
    EXPECT_FALSE(r.nextKey(key));
  }
}

TEST(Numbers, MicrosecondsToNanoseconds) {
  int64_t ns = 0;
  ASSERT_TRUE(parseUsToNs("5091544930193.823", ns));
  EXPECT_EQ(ns, 5091544930193823);
  ASSERT_TRUE(parseUsToNs("1", ns));
  EXPECT_EQ(ns, 1000);
  ASSERT_TRUE(parseUsToNs("0.5", ns));
  EXPECT_EQ(ns, 500);
  ASSERT_TRUE(parseUsToNs("1.2345", ns));
  EXPECT_EQ(ns, 1235);
  ASSERT_TRUE(parseUsToNs("1.2344", ns));
  EXPECT_EQ(ns, 1234);
  ASSERT_TRUE(parseUsToNs("-1.5", ns));
  EXPECT_EQ(ns, -1500);
  ASSERT_TRUE(parseUsToNs("1.5e3", ns));
  EXPECT_EQ(ns, 1500000);
  // Epoch microseconds still fit.
  ASSERT_TRUE(parseUsToNs("1790857026000000.001", ns));
  EXPECT_EQ(ns, 1790857026000000001);
  EXPECT_FALSE(parseUsToNs("99999999999999999999", ns));
}

TEST(Numbers, Int64) {
  int64_t v = 0;
  ASSERT_TRUE(parseInt64("9223372036854775807", v));
  EXPECT_EQ(v, INT64_MAX);
  ASSERT_TRUE(parseInt64("-9223372036854775808", v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_FALSE(parseInt64("9223372036854775808", v));
  EXPECT_FALSE(parseInt64("1.0", v));
  EXPECT_FALSE(parseInt64("1e3", v));
  EXPECT_FALSE(parseInt64("", v));
}

std::string gzip(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(Gzip, IsDetectedAndInflated) {
  const std::string gz = gzip(kDocument);
  ASSERT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  auto plain = readerFor(kDocument);
  const std::string expected = canonical(plain);
  for (size_t buffer : {size_t{1}, size_t{7}, JsonReader::kDefaultBufferSize}) {
    JsonReader r(openMemorySource(gz.data(), gz.size()), buffer);
    EXPECT_EQ(canonical(r), expected);
    EXPECT_TRUE(r.atEnd());
  }
}

TEST(Gzip, ConcatenatedMembersAreOneStream) {
  const std::string gz = gzip("[1, 2") + gzip(", 3]");
  JsonReader r(openMemorySource(gz.data(), gz.size()));
  EXPECT_EQ(canonical(r), "[n(1);n(2);n(3);]");
}

TEST(Gzip, TruncatedStreamIsAnIoError) {
  std::string gz = gzip(kDocument);
  gz.resize(gz.size() / 2);
  JsonReader r(openMemorySource(gz.data(), gz.size()));
  EXPECT_THROW(r.skipValue(), IoError);
}

TEST(FileSource, MissingFileIsAnIoError) { EXPECT_THROW(openFileSource("/nonexistent/trace.json"), IoError); }

}  // namespace
}  // namespace openreg::trace

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "openreg/common/json_writer.h"

using openreg::common::appendJsonString;
using openreg::common::JsonWriter;

namespace {

std::string escaped(std::string_view text) {
  std::string out;
  appendJsonString(out, text);
  return out;
}

}  // namespace

TEST(JsonWriterEscape, QuotesAndBackslashes) {
  EXPECT_EQ(escaped(R"(say "hi")"), R"("say \"hi\"")");
  EXPECT_EQ(escaped(R"(C:\path\)"), R"("C:\\path\\")");
  EXPECT_EQ(escaped("\\\""), R"("\\\"")");
}

TEST(JsonWriterEscape, ControlCharacters) {
  EXPECT_EQ(escaped("a\nb\rc\td"), R"("a\nb\rc\td")");
  EXPECT_EQ(escaped("\b\f"), R"("\b\f")");
  EXPECT_EQ(escaped(std::string_view("\x00\x01\x1f", 3)), R"("\u0000\u0001\u001f")");
  EXPECT_EQ(escaped("\x7f"), "\"\x7f\"");  // DEL needs no escape
}

TEST(JsonWriterEscape, NonAsciiPassesThrough) {
  const std::string utf8 = "gr\xc3\xbc\xc3\x9f \xe6\xbc\xa2 \xf0\x9f\x9a\x80";
  EXPECT_EQ(escaped(utf8), "\"" + utf8 + "\"");
  // A stray continuation byte is passed on as it is, not mangled.
  EXPECT_EQ(escaped("\x80"), "\"\x80\"");
}

TEST(JsonWriter, KeysAreEscapedToo) {
  JsonWriter w;
  w.beginObject().field("a\"b", 1).endObject();
  EXPECT_EQ(w.str(), R"({"a\"b":1})");
}

TEST(JsonWriter, CommasBetweenMembersAndElements) {
  JsonWriter w;
  w.beginObject()
      .field("x", 1)
      .field("y", 2)
      .key("list")
      .beginArray()
      .value(1)
      .value(2)
      .value(3)
      .endArray()
      .field("z", "s")
      .endObject();
  EXPECT_EQ(w.str(), R"({"x":1,"y":2,"list":[1,2,3],"z":"s"})");
  EXPECT_TRUE(w.complete());
}

TEST(JsonWriter, NestingAndEmptyContainers) {
  JsonWriter w;
  w.beginArray()
      .beginObject()
      .endObject()
      .beginArray()
      .endArray()
      .beginObject()
      .key("inner")
      .beginObject()
      .key("deep")
      .beginArray()
      .beginArray()
      .value(true)
      .endArray()
      .endArray()
      .endObject()
      .endObject()
      .endArray();
  EXPECT_EQ(w.str(), R"([{},[],{"inner":{"deep":[[true]]}}])");
  EXPECT_EQ(w.depth(), 0u);
  EXPECT_TRUE(w.complete());
}

TEST(JsonWriter, DepthAndCompleteTrackOpenContainers) {
  JsonWriter w;
  EXPECT_FALSE(w.complete());
  w.beginObject().key("a");
  EXPECT_EQ(w.depth(), 1u);
  EXPECT_FALSE(w.complete());
  w.beginArray();
  EXPECT_EQ(w.depth(), 2u);
  w.endArray().endObject();
  EXPECT_TRUE(w.complete());
}

TEST(JsonWriter, Scalars) {
  JsonWriter w;
  w.beginArray()
      .value(true)
      .value(false)
      .null()
      .value(int64_t{-9223372036854775807LL - 1})
      .value(uint64_t{18446744073709551615ULL})
      .value(0)
      .value(-7)
      .value("text")
      .value(std::string("str"))
      .endArray();
  EXPECT_EQ(w.str(), R"([true,false,null,-9223372036854775808,18446744073709551615,0,-7,"text","str"])");
}

TEST(JsonWriter, DoublesRoundTripAndNonFiniteIsNull) {
  JsonWriter w;
  w.beginArray()
      .value(0.1)
      .value(1.5)
      .value(-2.0)
      .value(1e-9)
      .value(123456789.125)
      .value(std::nan(""))
      .value(std::numeric_limits<double>::infinity())
      .endArray();
  EXPECT_EQ(w.str(), "[0.1,1.5,-2,1e-09,123456789.125,null,null]");
}

TEST(JsonWriter, FixedDecimalsAsKinetoTimestamps) {
  JsonWriter w;
  w.beginObject()
      .key("ts")
      .valueFixed(1700000000123.4567, 3)
      .key("dur")
      .valueFixed(2.0, 3)
      .key("n")
      .valueFixed(-std::numeric_limits<double>::infinity(), 3)
      .endObject();
  EXPECT_EQ(w.str(), R"({"ts":1700000000123.457,"dur":2.000,"n":null})");
}

TEST(JsonWriter, TakeMovesTheDocumentOut) {
  JsonWriter w;
  w.beginObject().endObject();
  std::string doc = w.take();
  EXPECT_EQ(doc, "{}");
}

TEST(JsonWriter, SpacedLayoutAsKinetoWritesArgs) {
  JsonWriter w(JsonWriter::Layout::Spaced);
  w.beginObject().field("device", 0).key("grid").beginArray().value(4).value(1).value(1).endArray();
  w.field("kind", "HtoD").key("empty").beginObject().endObject().endObject();
  EXPECT_EQ(w.str(), R"({"device": 0, "grid": [4, 1, 1], "kind": "HtoD", "empty": {}})");
}

// Loads the test implementations of the activity API through the same
// dlopen/dlsym wrapper the plugin uses.
#include "activity_api.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using openreg::profiler::ActivityApi;

namespace {

std::string replayLibrary(const char* name) {
  const char* dir = std::getenv("OPENREG_REPLAY_DIR");
  return std::string(dir != nullptr ? dir : ".") + "/lib" + name + ".so";
}

}  // namespace

TEST(ActivityApi, ResolvesAFullImplementation) {
  ActivityApi api(replayLibrary("openreg_activity_replay"));
  ASSERT_TRUE(api.available()) << api.error();
  EXPECT_TRUE(api.error().empty());
  EXPECT_EQ(api.version(), uint32_t{OR_ACTIVITY_API_VERSION});
  int count = 0;
  EXPECT_EQ(api.fn().getDeviceCount(&count), orSuccess);
  EXPECT_GE(count, 1);
  EXPECT_EQ(api.describe(orErrorTimeout), "orErrorTimeout (11)");
}

TEST(ActivityApi, NamesTheMissingSymbols) {
  const std::string path = replayLibrary("openreg_activity_partial");
  ActivityApi api(path);
  EXPECT_FALSE(api.available());
  EXPECT_NE(api.error().find(path), std::string::npos) << api.error();
  EXPECT_NE(api.error().find("orActivityFlushAll"), std::string::npos) << api.error();
  EXPECT_NE(api.error().find("orActivityGetClockSample"), std::string::npos) << api.error();
  EXPECT_EQ(api.missingSymbols().size(), 2u);
}

TEST(ActivityApi, NamesALibraryThatIsNotThere) {
  ActivityApi api("/nonexistent/libopenreg_missing.so");
  EXPECT_FALSE(api.available());
  EXPECT_NE(api.error().find("/nonexistent/libopenreg_missing.so"), std::string::npos) << api.error();
  EXPECT_NE(api.error().find("OPENREG_ACTIVITY_LIBRARY"), std::string::npos);
}

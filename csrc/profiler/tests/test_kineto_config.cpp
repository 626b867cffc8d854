#include "kineto_config.h"

#include <gtest/gtest.h>

using openreg::profiler::configNamesActivityTypes;
using openreg::profiler::configValue;

// The text `dyno gputrace` sends names no types: Kineto gives every plugin
// its default set then.
TEST(KinetoConfig, DynoGputraceRequestNamesNoTypes) {
  EXPECT_FALSE(configNamesActivityTypes(
      "ACTIVITIES_LOG_FILE=/tmp/trace.json\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=500\n"
      "PROFILE_REPORT_INPUT_SHAPES=false\nPROFILE_WITH_STACK=false\nREQUEST_TRACE_ID=42\n"));
  EXPECT_FALSE(configNamesActivityTypes(""));
}

TEST(KinetoConfig, NamedTypesAreSeen) {
  EXPECT_TRUE(configNamesActivityTypes("ACTIVITY_TYPES=kernel,cpu_op"));
  EXPECT_TRUE(configNamesActivityTypes("ACTIVITIES_LOG_FILE=/x.json\n  ACTIVITY_TYPES = kernel \r\nX=1"));
  EXPECT_TRUE(configNamesActivityTypes("ACTIVITY_TYPES=cpu_op # and nothing else"));
}

// Kineto falls back to its default set for an empty list.
TEST(KinetoConfig, EmptyListIsNoChoice) {
  EXPECT_FALSE(configNamesActivityTypes("ACTIVITY_TYPES="));
  EXPECT_FALSE(configNamesActivityTypes("ACTIVITY_TYPES= , ,"));
  EXPECT_FALSE(configNamesActivityTypes("ACTIVITY_TYPES=kernel\nACTIVITY_TYPES="));
}

TEST(KinetoConfig, CommentsAndOtherKeysDoNotCount) {
  EXPECT_FALSE(configNamesActivityTypes("# ACTIVITY_TYPES=kernel"));
  EXPECT_FALSE(configNamesActivityTypes("MY_ACTIVITY_TYPES=kernel\nACTIVITY_TYPES_X=kernel"));
  EXPECT_FALSE(configNamesActivityTypes("ACTIVITY_TYPES kernel"));
}

// What torch's _ExperimentalConfig(profiler_metrics=..., profiler_measure_per_kernel=...) writes into the text.
TEST(KinetoConfig, AKeysValueIsItsLastLineTrimmed) {
  const std::string text =
      "ACTIVITIES_WARMUP_PERIOD_SECS=0\nCUPTI_PROFILER_METRICS= a,b \nCUPTI_PROFILER_ENABLE_PER_KERNEL=true # x";
  EXPECT_EQ(configValue(text, "CUPTI_PROFILER_METRICS"), "a,b");
  EXPECT_EQ(configValue(text, "CUPTI_PROFILER_ENABLE_PER_KERNEL"), "true");
  EXPECT_EQ(configValue("K=1\nK=2", "K"), "2");
  EXPECT_EQ(configValue("K=", "K"), "");
  EXPECT_EQ(configValue("KK=1\n# K=1", "K"), std::nullopt);
}

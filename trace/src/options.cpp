#include "options.h"

#include <cmath>
#include <functional>
#include <stdexcept>
#include <utility>

namespace openreg::trace {

namespace {

using Setter = std::function<void(JsonReader&)>;

void parseObject(std::string_view json, std::initializer_list<std::pair<std::string_view, Setter>> setters) {
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) return;
  try {
    JsonReader r(openMemorySource(json.data(), json.size()));
    if (r.peekKind() != JsonKind::Object) throw std::invalid_argument("options must be a JSON object");
    r.beginObject();
    std::string_view key;
    while (r.nextKey(key)) {
      const Setter* setter = nullptr;
      for (const auto& [name, s] : setters)
        if (name == key) setter = &s;
      if (!setter) throw std::invalid_argument("unknown option \"" + std::string(key) + "\"");
      (*setter)(r);
    }
    if (!r.atEnd()) throw std::invalid_argument("data after the options object");
  } catch (const JsonError& e) {
    throw std::invalid_argument(std::string("options: ") + e.what());
  }
}

Setter intOption(const char* name, int& out) {
  return [name, &out](JsonReader& r) {
    int64_t v = 0;
    if (r.peekKind() != JsonKind::Number || !parseInt64(r.readNumber(), v) || v < 0 || v > 1000000000)
      throw std::invalid_argument(std::string("option \"") + name + "\" must be a non-negative integer");
    out = static_cast<int>(v);
  };
}

Setter int64Option(const char* name, int64_t& out) {
  return [name, &out](JsonReader& r) {
    if (r.peekKind() != JsonKind::Number || !parseInt64(r.readNumber(), out) || out < 0)
      throw std::invalid_argument(std::string("option \"") + name + "\" must be a non-negative integer");
  };
}

Setter peakOption(const char* name, std::optional<double>& out) {
  return [name, &out](JsonReader& r) {
    const double v = r.peekKind() == JsonKind::Number ? parseDouble(r.readNumber()) : 0.0;
    if (!(v > 0) || !std::isfinite(v))
      throw std::invalid_argument(std::string("option \"") + name + "\" must be a positive number");
    out = v;
  };
}

Setter boolOption(const char* name, bool& out) {
  return [name, &out](JsonReader& r) {
    JsonKind k = r.peekKind();
    if (k != JsonKind::True && k != JsonKind::False)
      throw std::invalid_argument(std::string("option \"") + name + "\" must be true or false");
    out = r.readBool();
  };
}

Setter stringsOption(const char* name, std::vector<std::string>& out, bool* given = nullptr) {
  return [name, &out, given](JsonReader& r) {
    if (r.peekKind() != JsonKind::Array)
      throw std::invalid_argument(std::string("option \"") + name + "\" must be a list of strings");
    out.clear();
    r.beginArray();
    while (r.nextElement()) {
      if (r.peekKind() != JsonKind::String)
        throw std::invalid_argument(std::string("option \"") + name + "\" must be a list of strings");
      out.emplace_back(r.readString());
    }
    if (given) *given = true;
  };
}

}  // namespace

LoadOptions parseLoadOptions(std::string_view json) {
  LoadOptions o;
  parseObject(json, {
                        {"device_categories", stringsOption("device_categories", o.deviceCategories)},
                        {"infer_device_categories", boolOption("infer_device_categories", o.inferDeviceCategories)},
                        {"runtime_categories",
                         stringsOption("runtime_categories", o.runtimeCategories, &o.runtimeCategoriesGiven)},
                        {"annotation_categories", stringsOption("annotation_categories", o.annotationCategories)},
                        {"op_categories", stringsOption("op_categories", o.opCategories)},
                        {"flow_categories", stringsOption("flow_categories", o.flowCategories)},
                    });
  return o;
}

SummaryOptions parseSummaryOptions(std::string_view json) {
  SummaryOptions o;
  parseObject(json, {{"top", intOption("top", o.top)},
                     {"gaps", intOption("gaps", o.gaps)},
                     {"kernel_wait_ns", int64Option("kernel_wait_ns", o.kernelWaitNs)},
                     {"slow_launch_ns", int64Option("slow_launch_ns", o.slowLaunchNs)},
                     {"slow_start_ns", int64Option("slow_start_ns", o.slowStartNs)},
                     {"peak_flops", peakOption("peak_flops", o.peakFlops)},
                     {"peak_bytes_per_s", peakOption("peak_bytes_per_s", o.peakBytesPerS)}});
  return o;
}

CheckOptions parseCheckOptions(std::string_view json) {
  CheckOptions o;
  parseObject(json, {
                        {"examples", intOption("examples", o.examples)},
                        {"skip", stringsOption("skip", o.skip)},
                        {"only", stringsOption("only", o.only)},
                        {"window_slack_ns", int64Option("window_slack_ns", o.windowSlackNs)},
                        {"strict", boolOption("strict", o.strict)},
                    });
  return o;
}

TimelineOptions parseTimelineOptions(std::string_view json) {
  TimelineOptions o;
  parseObject(json, {{"width", intOption("width", o.width)}});
  if (o.width < 1) throw std::invalid_argument("option \"width\" must be at least 1");
  return o;
}

}  // namespace openreg::trace

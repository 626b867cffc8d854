#include "options.h"

#include <functional>
#include <stdexcept>
#include <utility>

namespace openreg::trace {

namespace {

using Setter = std::function<void(JsonReader&)>;

void parse_object(std::string_view json, std::initializer_list<std::pair<std::string_view, Setter>> setters) {
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) return;
  try {
    JsonReader r(open_memory_source(json.data(), json.size()));
    if (r.peek_kind() != JsonKind::kObject) throw std::invalid_argument("options must be a JSON object");
    r.begin_object();
    std::string_view key;
    while (r.next_key(key)) {
      const Setter* setter = nullptr;
      for (const auto& [name, s] : setters)
        if (name == key) setter = &s;
      if (!setter) throw std::invalid_argument("unknown option \"" + std::string(key) + "\"");
      (*setter)(r);
    }
    if (!r.at_end()) throw std::invalid_argument("data after the options object");
  } catch (const JsonError& e) {
    throw std::invalid_argument(std::string("options: ") + e.what());
  }
}

Setter int_option(const char* name, int& out) {
  return [name, &out](JsonReader& r) {
    int64_t v = 0;
    if (r.peek_kind() != JsonKind::kNumber || !parse_int64(r.read_number(), v) || v < 0 || v > 1000000000)
      throw std::invalid_argument(std::string("option \"") + name + "\" must be a non-negative integer");
    out = static_cast<int>(v);
  };
}

Setter int64_option(const char* name, int64_t& out) {
  return [name, &out](JsonReader& r) {
    if (r.peek_kind() != JsonKind::kNumber || !parse_int64(r.read_number(), out) || out < 0)
      throw std::invalid_argument(std::string("option \"") + name + "\" must be a non-negative integer");
  };
}

Setter bool_option(const char* name, bool& out) {
  return [name, &out](JsonReader& r) {
    JsonKind k = r.peek_kind();
    if (k != JsonKind::kTrue && k != JsonKind::kFalse)
      throw std::invalid_argument(std::string("option \"") + name + "\" must be true or false");
    out = r.read_bool();
  };
}

Setter strings_option(const char* name, std::vector<std::string>& out, bool* given = nullptr) {
  return [name, &out, given](JsonReader& r) {
    if (r.peek_kind() != JsonKind::kArray)
      throw std::invalid_argument(std::string("option \"") + name + "\" must be a list of strings");
    out.clear();
    r.begin_array();
    while (r.next_element()) {
      if (r.peek_kind() != JsonKind::kString)
        throw std::invalid_argument(std::string("option \"") + name + "\" must be a list of strings");
      out.emplace_back(r.read_string());
    }
    if (given) *given = true;
  };
}

}  // namespace

LoadOptions parse_load_options(std::string_view json) {
  LoadOptions o;
  parse_object(json, {
                         {"device_categories", strings_option("device_categories", o.device_categories)},
                         {"infer_device_categories", bool_option("infer_device_categories", o.infer_device_categories)},
                         {"runtime_categories",
                          strings_option("runtime_categories", o.runtime_categories, &o.runtime_categories_given)},
                         {"annotation_categories", strings_option("annotation_categories", o.annotation_categories)},
                         {"op_categories", strings_option("op_categories", o.op_categories)},
                         {"flow_categories", strings_option("flow_categories", o.flow_categories)},
                     });
  return o;
}

SummaryOptions parse_summary_options(std::string_view json) {
  SummaryOptions o;
  parse_object(json, {{"top", int_option("top", o.top)}, {"gaps", int_option("gaps", o.gaps)}});
  return o;
}

CheckOptions parse_check_options(std::string_view json) {
  CheckOptions o;
  parse_object(json, {
                         {"examples", int_option("examples", o.examples)},
                         {"skip", strings_option("skip", o.skip)},
                         {"only", strings_option("only", o.only)},
                         {"window_slack_ns", int64_option("window_slack_ns", o.window_slack_ns)},
                         {"strict", bool_option("strict", o.strict)},
                     });
  return o;
}

TimelineOptions parse_timeline_options(std::string_view json) {
  TimelineOptions o;
  parse_object(json, {{"width", int_option("width", o.width)}});
  if (o.width < 1) throw std::invalid_argument("option \"width\" must be at least 1");
  return o;
}

}  // namespace openreg::trace

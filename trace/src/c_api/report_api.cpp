// The report's C entry point (include/openreg/trace_report.h): exceptions stop here.
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "openreg/common/json_writer.h"
#include "openreg/trace_report.h"
#include "options.h"
#include "report_data.h"
#include "trace_model.h"

namespace {

ortrace_status reportFail(char** out, ortrace_status status, const std::string& message) {
  openreg::common::JsonWriter w;
  w.beginObject().field("status", ortrace_status_name(status)).field("message", message).endObject();
  const std::string& s = w.str();
  *out = static_cast<char*>(std::malloc(s.size() + 1));
  if (*out) std::memcpy(*out, s.c_str(), s.size() + 1);
  return status;
}

}  // namespace

extern "C" ortrace_status ortrace_report_data(const char* path, const char* loadOptionsJson,
                                              const char* reportOptionsJson, char** outJson) {
  if (!outJson) return ORTRACE_ERROR_INVALID_ARGUMENT;
  *outJson = nullptr;
  if (!path) return reportFail(outJson, ORTRACE_ERROR_INVALID_ARGUMENT, "path is NULL");
  try {
    const auto load = openreg::trace::parseLoadOptions(loadOptionsJson ? loadOptionsJson : "");
    const auto options = openreg::trace::parseReportOptions(reportOptionsJson ? reportOptionsJson : "");
    auto trace = openreg::trace::loadTraceFile(path, load);
    if (trace->parseError)
      return reportFail(
          outJson, ORTRACE_ERROR_PARSE,
          "invalid trace at byte " + std::to_string(trace->parseError->offset) + ": " + trace->parseError->message);
    if (trace->eventCount == trace->malformedCount)  // nothing to show: a page would only say "0 events"
      return reportFail(outJson, ORTRACE_ERROR_PARSE,
                        trace->eventCount == 0 ? std::string("it holds no events")
                                               : "none of its " + std::to_string(trace->eventCount) +
                                                     " events is a trace event (all malformed)");
    const std::string json = openreg::trace::reportJson(*trace, path, options);
    *outJson = static_cast<char*>(std::malloc(json.size() + 1));
    if (!*outJson) return ORTRACE_ERROR_OUT_OF_MEMORY;
    std::memcpy(*outJson, json.c_str(), json.size() + 1);
    return ORTRACE_OK;
  } catch (const std::bad_alloc&) {
    return ORTRACE_ERROR_OUT_OF_MEMORY;
  } catch (const std::invalid_argument& e) {
    return reportFail(outJson, ORTRACE_ERROR_INVALID_ARGUMENT, e.what());
  } catch (const openreg::trace::IoError& e) {
    return reportFail(outJson, ORTRACE_ERROR_IO, e.what());
  } catch (const std::exception& e) {
    return reportFail(outJson, ORTRACE_ERROR_INTERNAL, e.what());
  } catch (...) {
    return reportFail(outJson, ORTRACE_ERROR_INTERNAL, "unknown error");
  }
}

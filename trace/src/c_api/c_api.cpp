// The C ABI: every entry point catches everything, so no C++ exception
// crosses into the caller (ctypes would abort the interpreter).
#include "openreg/trace_analysis.h"

#include <cstdlib>
#include <functional>
#include <memory>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis.h"
#include "critical_path.h"
#include "openreg/common/json_writer.h"
#include "options.h"
#include "trace_model.h"

struct ortrace_trace {
  std::unique_ptr<openreg::trace::Trace> trace;
};

namespace {

using openreg::common::JsonWriter;

char* copyOut(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

void setOut(char** out, const std::string& s) {
  if (out) *out = copyOut(s);
}

ortrace_status fail(char** out, ortrace_status status, const std::string& message) {
  if (out) {
    JsonWriter w;
    w.beginObject().field("status", ortrace_status_name(status)).field("message", message).endObject();
    *out = copyOut(w.str());
  }
  return status;
}

// Runs `body`, translating exceptions into statuses.
template <typename Body>
ortrace_status guarded(char** out, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    if (out) *out = nullptr;  // a message would need memory too
    return ORTRACE_ERROR_OUT_OF_MEMORY;
  } catch (const std::invalid_argument& e) {
    return fail(out, ORTRACE_ERROR_INVALID_ARGUMENT, e.what());
  } catch (const openreg::trace::IoError& e) {
    return fail(out, ORTRACE_ERROR_IO, e.what());
  } catch (const std::exception& e) {
    return fail(out, ORTRACE_ERROR_INTERNAL, e.what());
  } catch (...) {
    return fail(out, ORTRACE_ERROR_INTERNAL, "unknown error");
  }
}

std::string_view text(const char* s) { return s ? std::string_view(s) : std::string_view(); }

ortrace_status openWith(
    ortrace_trace** outTrace, char** outError, const char* optionsJson,
    const std::function<std::unique_ptr<openreg::trace::Trace>(const openreg::trace::LoadOptions&)>& load) {
  if (outError) *outError = nullptr;
  if (!outTrace) return fail(outError, ORTRACE_ERROR_INVALID_ARGUMENT, "outTrace is NULL");
  *outTrace = nullptr;
  return guarded(outError, [&] {
    auto options = openreg::trace::parseLoadOptions(text(optionsJson));
    auto handle = std::make_unique<ortrace_trace>();
    handle->trace = load(options);
    *outTrace = handle.release();
    return ORTRACE_OK;
  });
}

// Shared shape of the analyses: validate, then render or report the parse error.
template <typename Render>
ortrace_status analyse(const ortrace_trace* trace, char** outJson, bool needsValidJson, Render&& render) {
  if (!outJson) return ORTRACE_ERROR_INVALID_ARGUMENT;
  *outJson = nullptr;
  if (!trace || !trace->trace) return fail(outJson, ORTRACE_ERROR_INVALID_ARGUMENT, "trace handle is NULL");
  const auto& t = *trace->trace;
  if (needsValidJson && t.parseError)
    return fail(outJson, ORTRACE_ERROR_PARSE,
                "invalid trace at byte " + std::to_string(t.parseError->offset) + ": " + t.parseError->message);
  return guarded(outJson, [&] {
    setOut(outJson, render(t));
    return *outJson ? ORTRACE_OK : ORTRACE_ERROR_OUT_OF_MEMORY;
  });
}

}  // namespace

extern "C" {

const char* ortrace_version(void) { return "0.1.0"; }

const char* ortrace_status_name(ortrace_status status) {
  switch (status) {
    case ORTRACE_OK:
      return "ok";
    case ORTRACE_ERROR_INVALID_ARGUMENT:
      return "invalid_argument";
    case ORTRACE_ERROR_IO:
      return "io";
    case ORTRACE_ERROR_PARSE:
      return "parse";
    case ORTRACE_ERROR_OUT_OF_MEMORY:
      return "out_of_memory";
    case ORTRACE_ERROR_INTERNAL:
      return "internal";
  }
  return "unknown";
}

ortrace_status ortrace_open_file(const char* path, const char* optionsJson, ortrace_trace** outTrace, char** outError) {
  if (!path) {
    if (outTrace) *outTrace = nullptr;
    return fail(outError, ORTRACE_ERROR_INVALID_ARGUMENT, "path is NULL");
  }
  return openWith(outTrace, outError, optionsJson,
                  [&](const openreg::trace::LoadOptions& o) { return openreg::trace::loadTraceFile(path, o); });
}

ortrace_status ortrace_open_buffer(const void* data, size_t size, const char* optionsJson, ortrace_trace** outTrace,
                                   char** outError) {
  if (!data && size > 0) {
    if (outTrace) *outTrace = nullptr;
    return fail(outError, ORTRACE_ERROR_INVALID_ARGUMENT, "data is NULL");
  }
  static const char kEmpty[] = "";
  return openWith(outTrace, outError, optionsJson, [&](const openreg::trace::LoadOptions& o) {
    return openreg::trace::loadTraceBuffer(data ? data : kEmpty, size, o);
  });
}

void ortrace_close(ortrace_trace* trace) { delete trace; }

ortrace_status ortrace_summary(const ortrace_trace* trace, const char* optionsJson, char** outJson) {
  return analyse(trace, outJson, true, [&](const openreg::trace::Trace& t) {
    auto o = openreg::trace::parseSummaryOptions(text(optionsJson));
    return openreg::trace::summaryToJson(t, openreg::trace::computeSummary(t, o), o);
  });
}

ortrace_status ortrace_check(const ortrace_trace* trace, const char* optionsJson, char** outJson) {
  return analyse(trace, outJson, false, [&](const openreg::trace::Trace& t) {
    auto o = openreg::trace::parseCheckOptions(text(optionsJson));
    return openreg::trace::checkReportToJson(t, openreg::trace::runChecks(t, o));
  });
}

ortrace_status ortrace_list_checks(char** outJson) {
  if (!outJson) return ORTRACE_ERROR_INVALID_ARGUMENT;
  *outJson = nullptr;
  return guarded(outJson, [&] {
    setOut(outJson, openreg::trace::checkTableToJson());
    return *outJson ? ORTRACE_OK : ORTRACE_ERROR_OUT_OF_MEMORY;
  });
}

ortrace_status ortrace_timeline(const ortrace_trace* trace, const char* optionsJson, char** outJson) {
  return analyse(trace, outJson, true, [&](const openreg::trace::Trace& t) {
    return openreg::trace::timelineJson(t, openreg::trace::parseTimelineOptions(text(optionsJson)));
  });
}

ortrace_status ortrace_critical_path(const ortrace_trace* const* traces, size_t count, const char* optionsJson,
                                     char** outJson) {
  if (!outJson) return ORTRACE_ERROR_INVALID_ARGUMENT;
  *outJson = nullptr;
  if (!traces || count == 0) return fail(outJson, ORTRACE_ERROR_INVALID_ARGUMENT, "no trace handle given");
  std::vector<const openreg::trace::Trace*> ts;
  for (size_t i = 0; i < count; ++i) {
    if (!traces[i] || !traces[i]->trace) return fail(outJson, ORTRACE_ERROR_INVALID_ARGUMENT, "trace handle is NULL");
    const auto& t = *traces[i]->trace;
    if (t.parseError)
      return fail(outJson, ORTRACE_ERROR_PARSE,
                  "invalid trace at byte " + std::to_string(t.parseError->offset) + ": " + t.parseError->message);
    ts.push_back(&t);
  }
  return guarded(outJson, [&] {
    setOut(outJson, openreg::trace::criticalPathJson(ts, openreg::trace::parseCpOptions(text(optionsJson))));
    return *outJson ? ORTRACE_OK : ORTRACE_ERROR_OUT_OF_MEMORY;
  });
}

void ortrace_free_string(char* str) { std::free(str); }

}  // extern "C"

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

#include "analysis.h"
#include "openreg/common/json_writer.h"
#include "options.h"
#include "trace_model.h"

struct ortrace_trace {
  std::unique_ptr<openreg::trace::Trace> trace;
};

namespace {

using openreg::common::JsonWriter;

char* copy_out(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

void set_out(char** out, const std::string& s) {
  if (out) *out = copy_out(s);
}

ortrace_status fail(char** out, ortrace_status status, const std::string& message) {
  if (out) {
    JsonWriter w;
    w.beginObject().field("status", ortrace_status_name(status)).field("message", message).endObject();
    *out = copy_out(w.str());
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

ortrace_status open_with(ortrace_trace** out_trace, char** out_error, const char* options_json,
                         const std::function<std::unique_ptr<openreg::trace::Trace>(const openreg::trace::LoadOptions&)>& load) {
  if (out_error) *out_error = nullptr;
  if (!out_trace) return fail(out_error, ORTRACE_ERROR_INVALID_ARGUMENT, "out_trace is NULL");
  *out_trace = nullptr;
  return guarded(out_error, [&] {
    auto options = openreg::trace::parse_load_options(text(options_json));
    auto handle = std::make_unique<ortrace_trace>();
    handle->trace = load(options);
    *out_trace = handle.release();
    return ORTRACE_OK;
  });
}

// Shared shape of the analyses: validate, then render or report the parse error.
template <typename Render>
ortrace_status analyse(const ortrace_trace* trace, char** out_json, bool needs_valid_json, Render&& render) {
  if (!out_json) return ORTRACE_ERROR_INVALID_ARGUMENT;
  *out_json = nullptr;
  if (!trace || !trace->trace) return fail(out_json, ORTRACE_ERROR_INVALID_ARGUMENT, "trace handle is NULL");
  const auto& t = *trace->trace;
  if (needs_valid_json && t.parse_error)
    return fail(out_json, ORTRACE_ERROR_PARSE,
                "invalid trace at byte " + std::to_string(t.parse_error->offset) + ": " + t.parse_error->message);
  return guarded(out_json, [&] {
    set_out(out_json, render(t));
    return *out_json ? ORTRACE_OK : ORTRACE_ERROR_OUT_OF_MEMORY;
  });
}

}  // namespace

extern "C" {

const char* ortrace_version(void) { return "0.1.0"; }

const char* ortrace_status_name(ortrace_status status) {
  switch (status) {
    case ORTRACE_OK: return "ok";
    case ORTRACE_ERROR_INVALID_ARGUMENT: return "invalid_argument";
    case ORTRACE_ERROR_IO: return "io";
    case ORTRACE_ERROR_PARSE: return "parse";
    case ORTRACE_ERROR_OUT_OF_MEMORY: return "out_of_memory";
    case ORTRACE_ERROR_INTERNAL: return "internal";
  }
  return "unknown";
}

ortrace_status ortrace_open_file(const char* path, const char* options_json, ortrace_trace** out_trace,
                                 char** out_error) {
  if (!path) {
    if (out_trace) *out_trace = nullptr;
    return fail(out_error, ORTRACE_ERROR_INVALID_ARGUMENT, "path is NULL");
  }
  return open_with(out_trace, out_error, options_json,
                   [&](const openreg::trace::LoadOptions& o) { return openreg::trace::load_trace_file(path, o); });
}

ortrace_status ortrace_open_buffer(const void* data, size_t size, const char* options_json, ortrace_trace** out_trace,
                                   char** out_error) {
  if (!data && size > 0) {
    if (out_trace) *out_trace = nullptr;
    return fail(out_error, ORTRACE_ERROR_INVALID_ARGUMENT, "data is NULL");
  }
  static const char kEmpty[] = "";
  return open_with(out_trace, out_error, options_json, [&](const openreg::trace::LoadOptions& o) {
    return openreg::trace::load_trace_buffer(data ? data : kEmpty, size, o);
  });
}

void ortrace_close(ortrace_trace* trace) { delete trace; }

ortrace_status ortrace_summary(const ortrace_trace* trace, const char* options_json, char** out_json) {
  return analyse(trace, out_json, true, [&](const openreg::trace::Trace& t) {
    auto o = openreg::trace::parse_summary_options(text(options_json));
    return openreg::trace::summary_to_json(t, openreg::trace::compute_summary(t, o), o);
  });
}

ortrace_status ortrace_check(const ortrace_trace* trace, const char* options_json, char** out_json) {
  return analyse(trace, out_json, false, [&](const openreg::trace::Trace& t) {
    auto o = openreg::trace::parse_check_options(text(options_json));
    return openreg::trace::check_report_to_json(t, openreg::trace::run_checks(t, o));
  });
}

ortrace_status ortrace_list_checks(char** out_json) {
  if (!out_json) return ORTRACE_ERROR_INVALID_ARGUMENT;
  *out_json = nullptr;
  return guarded(out_json, [&] {
    set_out(out_json, openreg::trace::check_table_to_json());
    return *out_json ? ORTRACE_OK : ORTRACE_ERROR_OUT_OF_MEMORY;
  });
}

ortrace_status ortrace_timeline(const ortrace_trace* trace, const char* options_json, char** out_json) {
  return analyse(trace, out_json, true, [&](const openreg::trace::Trace& t) {
    return openreg::trace::timeline_json(t, openreg::trace::parse_timeline_options(text(options_json)));
  });
}

void ortrace_free_string(char* str) { std::free(str); }

}  // extern "C"

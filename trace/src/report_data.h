// The data of the HTML report (openreg_trace.report, python/openreg_trace/report): what the summary does
// not hold but the page shows. Per step, what bound it; the ops table (host
// time per op and input shapes) and the kernels table (the op that launched
// each kernel, its source line); the memory curve with what was live at the
// peak; and every slice packed into little-endian typed arrays (base64) for
// the page's canvas timeline, with the args of each event. The args and the
// memory instants' extra fields are not in the trace model: a second
// streaming pass over the file reads them.
#pragma once

#include <string>

#include "analysis.h"
#include "trace_model.h"

namespace openreg::trace {

struct ReportOptions {
  int top = 1'000'000'000;  // summary rows (the report's tables show them all)
  int gaps = 10;
  int memoryPoints = 4000;   // points of each memory curve (peaks kept)
  int counterPoints = 2000;  // samples of each counter track (peaks kept)
  int liveAtPeak = 20;       // largest live allocations listed at the peak
  int maxTableRows = 20000;
  bool events = true;                              // the packed events of the timeline
  bool deflate = true;                             // zlib-compress each packed array
  std::optional<double> peakFlops, peakBytesPerS;  // the roofline's, as the summary's options
};
ReportOptions parseReportOptions(std::string_view json);

// {"summary": <the summary JSON>, "report": {steps, op_table, kernel_table,
// memory, counters, timeline}}. `path` is read a second time for the args.
std::string reportJson(const Trace& t, const std::string& path, const ReportOptions& options);

}  // namespace openreg::trace

// The parts of the report's JSON (report_data.cpp assembles them).
#pragma once

#include "analysis.h"
#include "report_args.h"
#include "report_data.h"

namespace openreg::trace {

// report_tables.cpp
void writeSteps(JsonWriter& w, const Trace& t);
void writeOpTable(JsonWriter& w, const Trace& t, const EventArgs& args, const ReportOptions& o);
void writeKernelTable(JsonWriter& w, const Trace& t, const ReportOptions& o);
void writeMemoryCurves(JsonWriter& w, const Trace& t, const EventArgs& args, const ReportOptions& o);
// report_counters.cpp: the counter tracks' samples
void writeCounterCurves(JsonWriter& w, const Trace& t, const ReportOptions& o);
// report_events.cpp: the packed timeline
void writeTimelineEvents(JsonWriter& w, const Trace& t, const EventArgs& args, const ReportOptions& o);

}  // namespace openreg::trace

// Summary section: the roofline. Per kernel name and device, the FLOPs and
// bytes its metric ranges (cat cuda_profiler_range: openreg's per-kernel
// metrics, CUPTI's range profiler) report, the time they took, and what that
// achieved against the device's peaks. Nothing is estimated: a value the
// trace does not give stays null, and a note says what is missing.
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

// CUPTI's SASS instruction counters of floating-point work, and the FLOPs of
// one instruction (an FMA is two), as HTA's cupti_counter_analysis counts them.
constexpr std::array<std::pair<std::string_view, double>, 9> kSassFlops = {{
    {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 2},
    {"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", 2},
    {"smsp__sass_thread_inst_executed_op_hmul_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_hadd_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", 2},
    {"smsp__sass_thread_inst_executed_op_dmul_pred_on.sum", 1},
    {"smsp__sass_thread_inst_executed_op_dadd_pred_on.sum", 1},
}};

constexpr uint8_t timeBit(RangeTime r) { return static_cast<uint8_t>(1u << static_cast<unsigned>(r)); }

// The arg keys a range may carry, as string ids (kNoString: not in the trace).
struct MetricKeys {
  uint32_t flops, bytesRead, bytesWritten, dramRead, dramWrite, busyNs, kernels;
  std::array<uint32_t, kSassFlops.size()> sass;
  explicit MetricKeys(const Trace& t)
      : flops(t.strings.find("flops")),
        bytesRead(t.strings.find("bytes_read")),
        bytesWritten(t.strings.find("bytes_written")),
        dramRead(t.strings.find("dram__bytes_read.sum")),
        dramWrite(t.strings.find("dram__bytes_write.sum")),
        busyNs(t.strings.find("busy_ns")),
        kernels(t.strings.find("kernels")) {
    for (size_t k = 0; k < kSassFlops.size(); ++k) sass[k] = t.strings.find(kSassFlops[k].first);
  }
};

// The values of one range's args; openreg's names win over CUPTI's.
RangeMetrics readArgs(const Trace& t, const MetricKeys& keys, uint32_t index) {
  const MetricRange& m = t.metricRanges[index];
  RangeMetrics r;
  r.range = index;
  std::optional<double> dramRead, dramWrite, sass;
  for (const NumArg& a : t.argsOf(m.firstArg, m.argCount)) {
    if (a.key == keys.flops) r.flops = a.value;
    if (a.key == keys.bytesRead) r.bytesRead = a.value;
    if (a.key == keys.bytesWritten) r.bytesWritten = a.value;
    if (a.key == keys.dramRead) dramRead = a.value;
    if (a.key == keys.dramWrite) dramWrite = a.value;
    if (a.key == keys.busyNs) r.busyNs = a.value;
    if (a.key == keys.kernels) r.kernels = static_cast<int64_t>(a.value);
    for (size_t k = 0; k < keys.sass.size(); ++k)
      if (a.key == keys.sass[k]) sass = sass.value_or(0) + a.value * kSassFlops[k].second;
  }
  if (!r.flops && sass) {
    r.flops = sass;
    r.flopsFromSass = true;
  }
  if (!r.bytesRead && !r.bytesWritten) {
    r.bytesRead = dramRead;
    r.bytesWritten = dramWrite;
  }
  return r;
}

// Device slices by correlation, for the exact join of openreg's ranges.
std::unordered_map<int64_t, uint32_t> devicesByCorrelation(const Trace& t) {
  std::unordered_map<int64_t, uint32_t> out;
  for (uint32_t i : t.deviceSlices)
    if (t.slices[i].correlation.ok()) out.emplace(t.slices[i].correlation.value, i);
  return out;
}

// The kernel a range measures: the device event with its correlation on its
// device, else the one on its row with its ts and dur; kNoSlice if none.
int32_t matchKernel(const Trace& t, const MetricRange& m, const std::unordered_map<int64_t, uint32_t>& byCorrelation) {
  if (m.correlation.ok()) {
    auto it = byCorrelation.find(m.correlation.value);
    if (it != byCorrelation.end() && t.lanes[t.slices[it->second].lane].pid == m.lane.pid)
      return static_cast<int32_t>(it->second);
  }
  const std::optional<uint32_t> lane = t.findLane(m.lane);
  if (!lane) return kNoSlice;
  const std::vector<uint32_t>& row = t.laneSlices[*lane];
  auto it = std::lower_bound(row.begin(), row.end(), m.ts, [&](uint32_t i, int64_t ts) { return t.slices[i].ts < ts; });
  for (; it != row.end() && t.slices[*it].ts == m.ts; ++it)
    if (t.slices[*it].dur == m.dur && t.isDevice(t.slices[*it])) return static_cast<int32_t>(*it);
  return kNoSlice;
}

// A device total's time: the summed durations of the device's kernels (not
// copies or memsets) inside it; 0 when it encloses none.
int64_t kernelsInside(const Trace& t, const MetricRange& m) {
  int64_t sum = 0;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    if (t.lanes[s.lane].pid != m.lane.pid || s.ts < m.ts || s.end() > m.ts + m.dur) continue;
    if (classifyKernel(t, i) != KernelClass::Memory) sum = saturatingAdd(sum, s.dur);
  }
  return sum;
}

// Kineto's CUPTI range profiler gives its ranges no times of their own: it
// splits the profiling span evenly among them (CuptiRangeProfiler.cpp, "the
// actual times do not really matter here"). Its signature: a device's
// unmatched ranges, two or more, of one duration, each starting where the
// previous ended.
void markCuptiSplit(const Trace& t, std::vector<RangeMetrics>& all) {
  std::map<Key, std::vector<RangeMetrics*>> unmatched;
  for (RangeMetrics& r : all)
    if (r.time == RangeTime::Range && !r.kernels) unmatched[t.metricRanges[r.range].lane.pid].push_back(&r);
  for (auto& [pid, ranges] : unmatched) {
    if (ranges.size() < 2) continue;
    std::stable_sort(ranges.begin(), ranges.end(), [&](const RangeMetrics* a, const RangeMetrics* b) {
      return t.metricRanges[a->range].ts < t.metricRanges[b->range].ts;
    });
    bool split = true;
    for (size_t k = 1; k < ranges.size() && split; ++k) {
      const MetricRange& prev = t.metricRanges[ranges[k - 1]->range];
      const MetricRange& cur = t.metricRanges[ranges[k]->range];
      split = cur.dur == prev.dur && cur.ts == prev.ts + prev.dur;
    }
    if (split)
      for (RangeMetrics* r : ranges) r->time = RangeTime::CuptiSplit;
  }
}

void findTime(const Trace& t, const std::unordered_map<int64_t, uint32_t>& byCorrelation, RangeMetrics& r) {
  const MetricRange& m = t.metricRanges[r.range];
  r.time = RangeTime::Range;
  r.timeNs = m.dur;
  if (r.kernels) {
    if (const int64_t sum = kernelsInside(t, m); sum > 0) {
      r.time = RangeTime::Kernels;
      r.timeNs = sum;
    }
  } else if (const int32_t k = matchKernel(t, m, byCorrelation); k != kNoSlice) {
    r.time = RangeTime::Kernel;
    r.timeNs = t.slices[k].dur;
  }
}

// Sums a value over the ranges of a row: known only while every range had it.
template <typename T>
void addKnown(std::optional<T>& sum, const std::optional<T>& v, bool first) {
  sum = first ? v : (sum && v ? std::optional<T>(*sum + *v) : std::nullopt);
}

void addRange(RooflineRow& row, const RangeMetrics& r) {
  const bool first = row.count == 0;
  ++row.count;
  row.kernels += r.kernels.value_or(1);
  row.timeBases |= timeBit(r.time);
  addKnown(row.flops, r.flops, first);
  addKnown(row.bytesRead, r.bytesRead, first);
  addKnown(row.bytesWritten, r.bytesWritten, first);
  addKnown(row.busyNs, r.busyNs, first);
  addKnown(row.timeNs, r.time == RangeTime::CuptiSplit ? std::nullopt : std::optional<int64_t>(r.timeNs), first);
}

void addRow(RooflineRow& total, const RooflineRow& row) {
  const bool first = total.count == 0;
  total.count += row.count;
  total.kernels += row.kernels;
  total.timeBases |= row.timeBases;
  addKnown(total.flops, row.flops, first);
  addKnown(total.bytesRead, row.bytesRead, first);
  addKnown(total.bytesWritten, row.bytesWritten, first);
  addKnown(total.busyNs, row.busyNs, first);
  addKnown(total.timeNs, row.timeNs, first);
}

}  // namespace

const char* rangeTimeName(RangeTime r) {
  switch (r) {
    case RangeTime::Kernel:
      return "kernel";
    case RangeTime::Kernels:
      return "kernels";
    case RangeTime::Range:
      return "range";
    case RangeTime::CuptiSplit:
      return "cupti_range_split";
  }
  return "range";
}

std::optional<double> RooflineRow::bytes() const {
  if (!bytesRead || !bytesWritten) return std::nullopt;
  return *bytesRead + *bytesWritten;
}

std::optional<double> RooflineDevice::ridge() const {
  if (!peakFlops || !peakBytesPerS) return std::nullopt;
  return *peakFlops / *peakBytesPerS;
}

std::vector<RangeMetrics> readRangeMetrics(const Trace& t) {
  const MetricKeys keys(t);
  const auto byCorrelation = devicesByCorrelation(t);
  std::vector<RangeMetrics> out;
  out.reserve(t.metricRanges.size());
  for (uint32_t i = 0; i < t.metricRanges.size(); ++i) {
    out.push_back(readArgs(t, keys, i));
    findTime(t, byCorrelation, out.back());
  }
  markCuptiSplit(t, out);
  return out;
}

RooflineRates rooflineRates(const RooflineRow& row, const RooflineDevice& device) {
  RooflineRates r;
  const std::optional<double> bytes = row.bytes();
  if (row.flops && bytes && *bytes > 0) r.intensity = *row.flops / *bytes;
  if (row.timeNs && *row.timeNs > 0) {
    const double seconds = static_cast<double>(*row.timeNs) * 1e-9;
    if (row.flops) r.flopsPerS = *row.flops / seconds;
    if (bytes) r.bytesPerS = *bytes / seconds;
  }
  if (r.flopsPerS && device.peakFlops) r.peakFlopsShare = *r.flopsPerS / *device.peakFlops;
  if (r.bytesPerS && device.peakBytesPerS) r.peakBytesShare = *r.bytesPerS / *device.peakBytesPerS;
  if (r.intensity && device.ridge()) {
    r.attainableFlopsPerS = std::min(*device.peakFlops, *r.intensity * *device.peakBytesPerS);
    r.bound = *r.intensity < *device.ridge() ? "memory" : "compute";
    if (r.flopsPerS) r.rooflineShare = *r.flopsPerS / *r.attainableFlopsPerS;
  }
  return r;
}

namespace {

void findPeaks(const Trace& t, const SummaryOptions& options, RooflineDevice& d) {
  const DeviceProperties* props = nullptr;
  for (const DeviceProperties& p : t.deviceProperties)
    if (!d.device.isString && p.id == d.device.value) props = &p;
  if (props) d.name = props->name;
  auto pick = [&](const std::optional<double>& option, const std::optional<double>& declared,
                  std::optional<double>& peak, const char*& source) {
    if (option) {
      peak = option;
      source = "options";
    } else if (declared) {
      peak = declared;
      source = "deviceProperties";
    }
  };
  pick(options.peakFlops, props ? props->peakFlops : std::nullopt, d.peakFlops, d.peakFlopsSource);
  pick(options.peakBytesPerS, props ? props->peakBytesPerS : std::nullopt, d.peakBytesPerS, d.peakBytesSource);
}

// The arg keys the device's ranges carry, for saying what they hold instead.
std::string argKeysOf(const Trace& t, const std::vector<const RangeMetrics*>& ranges, uint64_t sassRanges) {
  if (sassRanges == ranges.size()) return "CUPTI's SASS instruction counters (smsp__sass_thread_inst_executed_op_*)";
  std::set<std::string_view> keys;
  for (const RangeMetrics* r : ranges) {
    const MetricRange& m = t.metricRanges[r->range];
    for (const NumArg& a : t.argsOf(m.firstArg, m.argCount)) keys.insert(t.str(a.key));
  }
  if (keys.empty()) return "no numeric args";
  std::string out;
  for (std::string_view k : keys) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

std::string countOf(uint64_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

void noteMissingValues(const Trace& t, const std::vector<const RangeMetrics*>& ranges, RooflineDevice& d) {
  const std::string who = "device " + t.keyText(d.device) + "'s " + countOf(ranges.size(), "range");
  uint64_t flops = 0, bytes = 0;
  for (const RangeMetrics* r : ranges) {
    flops += r->flops.has_value();
    bytes += r->bytesRead && r->bytesWritten;
  }
  if (flops < ranges.size())
    d.notes.push_back(
        "FLOPs unknown for " + std::to_string(ranges.size() - flops) + " of " + who +
        ": they have no \"flops\" arg and no SASS instruction counters "
        "(smsp__sass_thread_inst_executed_op_{ffma,fmul,fadd,hfma,hmul,hadd,dfma,dmul,dadd}_pred_on.sum)");
  if (bytes == 0)
    d.notes.push_back("arithmetic intensity unknown: it needs the bytes each kernel moved, and none of " + who +
                      " has them (args bytes_read and bytes_written, or CUPTI's dram__bytes_read.sum and "
                      "dram__bytes_write.sum); their args are " +
                      argKeysOf(t, ranges, d.sassRanges));
  else if (bytes < ranges.size())
    d.notes.push_back("bytes unknown for " + std::to_string(ranges.size() - bytes) + " of " + who +
                      " (no bytes_read and bytes_written, nor dram__bytes_read.sum and dram__bytes_write.sum)");
}

void noteTimes(const Trace& t, const std::vector<const RangeMetrics*>& ranges, RooflineDevice& d) {
  uint64_t split = 0, own = 0;
  int64_t splitDur = 0;
  for (const RangeMetrics* r : ranges) {
    if (r->time == RangeTime::CuptiSplit) {
      ++split;
      splitDur = t.metricRanges[r->range].dur;
    }
    own += r->time == RangeTime::Range;
  }
  const std::string dev = "device " + t.keyText(d.device);
  if (split)
    d.notes.push_back("achieved FLOP/s and bytes/s unknown: the trace has no kernel events to time " + dev + "'s " +
                      countOf(split, "range") +
                      " by (CUPTI's range mode suppresses them), and their own ts and dur are not the kernels': "
                      "Kineto's CUPTI range profiler splits its profiling span evenly among its ranges (here " +
                      std::to_string(split) + " of " + formatMs(splitDur) + ")");
  if (own)
    d.notes.push_back(countOf(own, "range") + " of " + dev +
                      " matched no kernel event: their rates are over the ranges' own durations");
}

void notePeaks(const Trace& t, RooflineDevice& d) {
  bool listed = false;
  for (const DeviceProperties& p : t.deviceProperties) listed |= !d.device.isString && p.id == d.device.value;
  const std::string where =
      listed ? "device " + t.keyText(d.device) + "'s deviceProperties entry has no "
             : "the trace's deviceProperties has no entry for device " + t.keyText(d.device) + ", so no ";
  if (!d.peakFlops)
    d.notes.push_back("peak FLOP/s unknown: " + where +
                      "peakFlopsPerSecond; give one with --peak-flops (summary option peak_flops)");
  if (!d.peakBytesPerS)
    d.notes.push_back("peak bytes/s unknown: " + where +
                      "peakBytesPerSecond; give one with --peak-bytes-per-s (summary option peak_bytes_per_s)");
}

// Rows per (kernel name, total or not), most time first, then most FLOPs.
void buildRows(const std::vector<const RangeMetrics*>& ranges, const Trace& t, RooflineDevice& d) {
  std::map<std::pair<uint32_t, bool>, RooflineRow> rows;
  for (const RangeMetrics* r : ranges) {
    RooflineRow& row = rows[{t.metricRanges[r->range].name, r->kernels.has_value()}];
    row.name = t.metricRanges[r->range].name;
    row.deviceTotal = r->kernels.has_value();
    addRange(row, *r);
  }
  for (auto& [key, row] : rows) d.rows.push_back(row);
  std::stable_sort(d.rows.begin(), d.rows.end(), [&](const RooflineRow& a, const RooflineRow& b) {
    if (a.timeNs.value_or(-1) != b.timeNs.value_or(-1)) return a.timeNs.value_or(-1) > b.timeNs.value_or(-1);
    if (a.flops.value_or(-1) != b.flops.value_or(-1)) return a.flops.value_or(-1) > b.flops.value_or(-1);
    return t.str(a.name) < t.str(b.name);
  });
  const bool perKernel = std::any_of(d.rows.begin(), d.rows.end(), [](const RooflineRow& r) { return !r.deviceTotal; });
  for (const RooflineRow& row : d.rows)
    if (row.deviceTotal != perKernel) addRow(d.total, row);
}

}  // namespace

Roofline computeRoofline(const Trace& t, const SummaryOptions& options) {
  Roofline out;
  const std::vector<RangeMetrics> all = readRangeMetrics(t);
  out.ranges = all.size();
  std::map<Key, std::vector<const RangeMetrics*>> byDevice;
  for (const RangeMetrics& r : all) byDevice[t.metricRanges[r.range].lane.pid].push_back(&r);
  for (auto& [pid, ranges] : byDevice) {
    RooflineDevice& d = out.devices.emplace_back();
    d.device = pid;
    d.ranges = ranges.size();
    for (const RangeMetrics* r : ranges) {
      d.flopsRanges += r->flops.has_value();
      d.sassRanges += r->flopsFromSass;
    }
    findPeaks(t, options, d);
    buildRows(ranges, t, d);
    noteMissingValues(t, ranges, d);
    noteTimes(t, ranges, d);
    notePeaks(t, d);
  }
  if (all.empty())
    out.notes.push_back(
        "no per-kernel metrics: the trace has no complete events of category cuda_profiler_range (openreg writes "
        "one per kernel with flops, bytes_read and bytes_written; Kineto's CUPTI range profiler with SASS "
        "instruction counters), so no FLOPs, bytes, arithmetic intensity or achieved rates");
  return out;
}

namespace {

void writeOptional(JsonWriter& w, const char* key, const std::optional<double>& v) {
  w.key(key);
  v ? w.value(*v) : w.null();
}

void writeTimeBasis(JsonWriter& w, uint8_t bases) {
  w.key("time_basis");
  const char* name = nullptr;
  for (RangeTime r : {RangeTime::Kernel, RangeTime::Kernels, RangeTime::Range, RangeTime::CuptiSplit})
    if (bases & timeBit(r)) name = name ? "mixed" : rangeTimeName(r);
  name ? w.value(name) : w.null();
}

void writeRow(JsonWriter& w, const Trace& t, const RooflineRow& row, const RooflineDevice& d) {
  const RooflineRates r = rooflineRates(row, d);
  w.beginObject().key("name");
  writeName(w, t, row.name);
  w.field("device_total", row.deviceTotal).field("count", row.count).field("kernels", row.kernels);
  writeTimeBasis(w, row.timeBases);
  w.key("time_ns");
  row.timeNs ? w.value(*row.timeNs) : w.null();
  writeOptional(w, "flops", row.flops);
  writeOptional(w, "bytes_read", row.bytesRead);
  writeOptional(w, "bytes_written", row.bytesWritten);
  writeOptional(w, "bytes", row.bytes());
  writeOptional(w, "busy_ns", row.busyNs);
  writeOptional(w, "intensity_flops_per_byte", r.intensity);
  writeOptional(w, "flops_per_s", r.flopsPerS);
  writeOptional(w, "bytes_per_s", r.bytesPerS);
  writeOptional(w, "peak_flops_share", r.peakFlopsShare);
  writeOptional(w, "peak_bytes_share", r.peakBytesShare);
  writeOptional(w, "attainable_flops_per_s", r.attainableFlopsPerS);
  writeOptional(w, "roofline_share", r.rooflineShare);
  w.key("bound");
  r.bound ? w.value(r.bound) : w.null();
  w.endObject();
}

void writeNotes(JsonWriter& w, const std::vector<std::string>& notes) {
  w.key("notes").beginArray();
  for (const std::string& n : notes) w.value(n);
  w.endArray();
}

void writeDevice(JsonWriter& w, const Trace& t, const RooflineDevice& d) {
  w.beginObject().key("device");
  writeKey(w, t, d.device);
  w.key("name");
  writeName(w, t, d.name);
  writeOptional(w, "peak_flops_per_s", d.peakFlops);
  w.key("peak_flops_source");
  d.peakFlopsSource ? w.value(d.peakFlopsSource) : w.null();
  writeOptional(w, "peak_bytes_per_s", d.peakBytesPerS);
  w.key("peak_bytes_source");
  d.peakBytesSource ? w.value(d.peakBytesSource) : w.null();
  writeOptional(w, "ridge_flops_per_byte", d.ridge());
  w.field("ranges", d.ranges);
  // Where the FLOPs came from: "flops" args, CUPTI's SASS counters, both, or nowhere (null).
  w.key("flops_from");
  if (d.flopsRanges == 0)
    w.null();
  else
    w.value(d.sassRanges == 0 ? "flops" : d.sassRanges == d.flopsRanges ? "sass_counters" : "mixed");
  w.key("kernels").beginArray();
  for (const RooflineRow& row : d.rows) writeRow(w, t, row, d);
  w.endArray().key("total");
  writeRow(w, t, d.total, d);
  writeNotes(w, d.notes);
  w.endObject();
}

}  // namespace

namespace sections {

void computeRoofline(const Trace& t, const SummaryOptions& options, Summary& s) {
  s.roofline = trace::computeRoofline(t, options);
}

void writeRoofline(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& /*options*/) {
  w.key("roofline").beginObject().field("ranges", s.roofline.ranges);
  w.key("devices").beginArray();
  for (const RooflineDevice& d : s.roofline.devices) writeDevice(w, t, d);
  w.endArray();
  writeNotes(w, s.roofline.notes);
  w.endObject();
}

}  // namespace sections

}  // namespace openreg::trace

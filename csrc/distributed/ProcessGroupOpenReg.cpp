#include "distributed/ProcessGroupOpenReg.h"

#include <algorithm>
#include <cstring>

#include <ATen/ATen.h>
#include <ATen/core/jit_type.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <openreg/runtime.hpp>
#include <torch/csrc/distributed/c10d/ParamCommsUtils.hpp>

#include "backend/Check.h"
#include "backend/HostAllocator.h"
#include "backend/Launch.h"
#include "backend/Stream.h"

namespace openreg::distributed {
namespace {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;

using Work = c10::intrusive_ptr<c10d::Work>;

std::exception_ptr distError(const std::string& message) {
  try {
    TORCH_CHECK_WITH(DistBackendError, false, message);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// "Sum" as in NCCL's kernel names; throws for what we do not support, and for
// an op the dtype cannot take (bitwise ops on floating point, as Gloo).
const char* reduceOpName(const c10d::ReduceOp& op, at::ScalarType dtype, const char* collective) {
  const bool bitwise =
      op.op_ == c10d::ReduceOp::BAND || op.op_ == c10d::ReduceOp::BOR || op.op_ == c10d::ReduceOp::BXOR;
  TORCH_CHECK_VALUE(!bitwise || !at::isFloatingType(dtype), "orccl: ", collective,
                    " cannot apply a bitwise reduce op (", static_cast<int>(op.op_), ") to ", dtype,
                    " tensors; it takes integer and bool tensors");
  TORCH_CHECK_VALUE(op.op_ != c10d::ReduceOp::PREMUL_SUM || dtype != at::kBool, "orccl: ", collective,
                    " cannot apply PREMUL_SUM to bool tensors");
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return "Sum";
    case c10d::ReduceOp::AVG:
      return "Avg";
    case c10d::ReduceOp::PRODUCT:
      return "Prod";
    case c10d::ReduceOp::MIN:
      return "Min";
    case c10d::ReduceOp::MAX:
      return "Max";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PreMulSum";
    case c10d::ReduceOp::BAND:
      return "BAnd";
    case c10d::ReduceOp::BOR:
      return "BOr";
    case c10d::ReduceOp::BXOR:
      return "BXor";
    default:
      TORCH_CHECK_VALUE(false, "orccl: ", collective, " does not support reduce op ", static_cast<int>(op.op_),
                        " (supported: SUM, AVG, MIN, MAX, PRODUCT, PREMUL_SUM, BAND, BOR, BXOR)");
  }
  return "";
}

// Gloo has no AVG and no PREMUL_SUM: it sums, and the transfer divides (AVG)
// or the inputs were multiplied first (PREMUL_SUM, premultipliedInput).
c10d::ReduceOp hostReduceOp(const c10d::ReduceOp& op) {
  const bool sums = op.op_ == c10d::ReduceOp::AVG || op.op_ == c10d::ReduceOp::PREMUL_SUM;
  return sums ? c10d::ReduceOp(c10d::ReduceOp::SUM) : op;
}

// PREMUL_SUM's factor as NCCL applies it: a double or a one-element tensor,
// cast to the input's dtype (an integer input takes the truncated factor), as
// a 0-dim tensor on the input's device.
at::Tensor premultiplyFactor(const c10d::ReduceOp& op, const at::Tensor& input, const char* collective) {
  // torch builds PREMUL_SUM only with a PreMulSumSupplement (ReduceOp's constructor checks it).
  const auto* supplement = static_cast<const c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK_VALUE(supplement != nullptr, "orccl: ", collective, ": PREMUL_SUM came without its factor");
  if (supplement->tensor_factor.defined()) {
    return supplement->tensor_factor.reshape({}).to(input.device(), input.scalar_type());
  }
  return at::scalar_tensor(supplement->double_factor, at::TensorOptions().dtype(at::kDouble))
      .to(input.scalar_type())
      .to(input.device());
}

// PREMUL_SUM: each input the collective reads is multiplied by the rank's
// factor, on the current stream: in place where the collective overwrites it
// anyway, else into a new tensor (the caller's input keeps its values).
void premultiplyInputs(ProcessGroupOpenReg::Request& request) {
  if (request.reduceOp.op_ != c10d::ReduceOp::PREMUL_SUM) return;
  for (auto& slot : request.slots) {
    if (!slot.read) continue;
    const at::Tensor factor = premultiplyFactor(request.reduceOp, slot.tensor, request.collective.c_str());
    if (slot.write) {
      slot.tensor.mul_(factor);
    } else {
      slot.tensor = at::mul(slot.tensor, factor);
    }
  }
}

bool supportedDtype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kChar:
    case at::kByte:
    case at::kInt:
    case at::kLong:
    case at::kBool:
      return true;
    default:
      return false;
  }
}

// Pinned host memory shaped like `tensor`, from the device's pinned allocator.
at::Tensor pinnedLike(const at::Tensor& tensor) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), tensor.nbytes(), backend::pinnedAllocator(), false);
  return at::empty({0}, tensor.options().device(at::kCPU)).set_(storage, 0, tensor.sizes(), tensor.strides());
}

int64_t totalNumel(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& t : tensors) total += t.numel();
  return total;
}

std::string rankList(const std::vector<int64_t>& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "]";
}

// out = op over ranks of their payloads' elements [offset, offset + out.numel()).
void reducePayloads(at::Tensor out, const std::vector<at::Tensor>& payloads, const c10d::ReduceOp& op, int64_t offset) {
  const auto slice = [&](const at::Tensor& p) { return p.view(out.scalar_type()).narrow(0, offset, out.numel()); };
  out.copy_(slice(payloads[0]));
  for (size_t r = 1; r < payloads.size(); ++r) reduceInto(out, slice(payloads[r]), op);
}

// all_reduce carried in the first exchange: views[0] is the buffer.
ProcessGroupOpenReg::Combine reduceInline(const c10d::ReduceOp& op) {
  return [op](const std::vector<at::Tensor>& payloads, std::vector<at::Tensor>& views) {
    reducePayloads(views[0].view(-1), payloads, op, 0);
  };
}

// reduce_scatter carried in the first exchange: views[0] is the output, and
// every rank's payload holds its inputs for all ranks, this rank's at `rank`.
ProcessGroupOpenReg::Combine reduceScatterInline(const c10d::ReduceOp& op, int rank) {
  return [op, rank](const std::vector<at::Tensor>& payloads, std::vector<at::Tensor>& views) {
    reducePayloads(views[0].view(-1), payloads, op, rank * views[0].numel());
  };
}

// all_gather carried in the first exchange: views[0] is the input, then one
// output per rank (intoOne: a single output holding them in rank order).
ProcessGroupOpenReg::Combine gatherInline(bool intoOne) {
  return [intoOne](const std::vector<at::Tensor>& payloads, std::vector<at::Tensor>& views) {
    const int64_t n = views[0].numel();
    for (size_t r = 0; r < payloads.size(); ++r) {
      at::Tensor to = intoOne ? views[1].view(-1).narrow(0, static_cast<int64_t>(r) * n, n) : views[1 + r].view(-1);
      to.copy_(payloads[r].view(to.scalar_type()));
    }
  };
}

}  // namespace

// The first exchange of every collective is an allgather of one block per
// rank, of the same size on every rank: Gloo aborts the process when lengths
// differ, so the block may not depend on what this call asked of a rank. It
// carries a header (what the rank is doing) and, when they fit, the rank's
// inputs: a small collective then moves its data in the exchange that checks
// it, with no round trip of its own. How large the block is comes from what
// the ranks agreed on before (see BlockSizer).
constexpr int64_t kHeaderWords = 4;  // collective, dtype, count, inlined
constexpr int64_t kHeaderBytes = kHeaderWords * sizeof(int64_t);
// The largest inputs that ride in a block. Each rank sends its block to
// every peer: for three ranks or more that moves more bytes than Gloo's rings,
// worth it for small messages only; between two ranks it moves what Gloo's
// ring allreduce moves and saves a round trip (measured to pay at 1 MiB; at
// 4 MiB no steady gain showed beside the copies into and out of the blocks).
constexpr int64_t maxInlineBytes(int groupSize) { return groupSize == 2 ? 1 << 20 : 256 << 10; }
// The Gloo tags of the first exchanges' messages and of pipelined
// transfers' chunks; send and recv refuse them.
constexpr int kExchangeTag = 0x6f726363;  // "orcc"
constexpr int kPipelineTag = kExchangeTag + 1;

// State of one transfer, owned by the runtime until it ran on the executor.
struct TransferBody {
  c10::intrusive_ptr<c10d::Backend> host;
  std::vector<ProcessGroupOpenReg::Part> parts;
  std::vector<at::Tensor> views;  // non-owning CPU views over pinned buffers
  std::vector<bool> reads;        // per view: an input the transfer sends
  std::shared_ptr<CollectiveOutcome> outcome;
  std::shared_ptr<ProcessGroupOpenReg::Health> health;
  std::string description;
  std::shared_ptr<ProcessGroupOpenReg::BlockSizer> sizer;
  int64_t payloadBytes = 0;  // of this transfer's blocks, from the sizer
  // Pipelined (one part with its pipeline set): the slots' device and pinned
  // memory, staged by the transfer itself, and the row of those copies.
  std::vector<StagedSlot> staged;
  std::shared_ptr<orStream_st> copyStream;

  int64_t blockBytes() const { return kHeaderBytes + payloadBytes; }

  // One part's first exchange: this rank's block and what came back.
  struct Exchange {
    at::Tensor mine;
    at::Tensor theirs;  // allgather: one block per rank; recv: the peer's header
    bool inlined = false;
  };

  // The bytes a part sends, if they fit in its block; -1 where they do not or
  // the part has no way to combine them (point-to-point, rooted, all-to-all).
  int64_t inlineBytes(const ProcessGroupOpenReg::Part& part) const {
    const auto& a = part.agreement;
    if (!part.combine || !a.check || a.peer >= 0) return -1;
    int64_t bytes = 0;
    for (size_t i = part.first; i < part.first + part.count; ++i) {
      if (reads[i]) bytes += static_cast<int64_t>(views[i].nbytes());
    }
    return bytes <= payloadBytes ? bytes : -1;
  }

  // The header, then (inlined) the part's inputs in slot order.
  at::Tensor block(const ProcessGroupOpenReg::Part& part, bool inlined) const {
    const auto& a = part.agreement;
    at::Tensor b = at::empty({a.peer >= 0 ? kHeaderBytes : blockBytes()}, at::kByte);
    auto* header = reinterpret_cast<int64_t*>(b.data_ptr());
    header[0] = a.collective;
    header[1] = a.dtype;
    header[2] = a.count;
    header[3] = inlined ? 1 : 0;
    auto* payload = b.data_ptr<uint8_t>() + kHeaderBytes;
    for (size_t i = part.first; inlined && i < part.first + part.count; ++i) {
      if (!reads[i]) continue;
      std::memcpy(payload, views[i].const_data_ptr(), views[i].nbytes());
      payload += views[i].nbytes();
    }
    // Zeroed past what was written: no stale host memory goes to the peers.
    std::memset(payload, 0, b.data_ptr<uint8_t>() + b.numel() - payload);
    return b;
  }

  // Every rank's block to every other, as point-to-point messages: Gloo
  // posts those from the calling thread, where its collectives would queue
  // for ProcessGroupGloo's worker thread and wake this one when done.
  void swapBlocks(Exchange& e, std::vector<c10::intrusive_ptr<c10d::Work>>& works) const {
    const int rank = host->getRank();
    const int64_t bytes = blockBytes();
    e.theirs.narrow(0, rank * bytes, bytes).copy_(e.mine);
    for (int peer = 0; peer < host->getSize(); ++peer) {
      if (peer == rank) continue;
      std::vector<at::Tensor> out{e.mine};
      std::vector<at::Tensor> in{e.theirs.narrow(0, peer * bytes, bytes)};
      works.push_back(host->send(out, peer, kExchangeTag));
      works.push_back(host->recv(in, peer, kExchangeTag));
    }
  }

  // Starts each part's first exchange (a send and its recv swap headers);
  // the exchanges are complete once `works` are.
  std::vector<Exchange> startExchange(std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
    payloadBytes = sizer->payloadBytes();
    std::vector<Exchange> out(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      const auto& a = parts[i].agreement;
      if (!a.check) continue;
      out[i].inlined = inlineBytes(parts[i]) >= 0;
      out[i].mine = block(parts[i], out[i].inlined);
      std::vector<at::Tensor> in{out[i].mine};
      if (a.peer < 0) {
        out[i].theirs = at::empty({host->getSize() * blockBytes()}, at::kByte);
        swapBlocks(out[i], works);
      } else if (a.sends) {
        works.push_back(host->send(in, a.peer, a.tag));
      } else {
        std::vector<at::Tensor> theirs{at::empty({kHeaderBytes}, at::kByte)};
        works.push_back(host->recv(theirs, a.peer, a.tag));
        out[i].theirs = theirs[0];
      }
    }
    return out;
  }

  // Waits for the first exchange, checks every part's agreement and keeps it
  // for the sizes of later blocks.
  void finishExchange(const std::vector<Exchange>& exchanges, std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
    for (auto& work : works) work->wait();
    works.clear();
    for (size_t i = 0; i < parts.size(); ++i) check(parts[i], exchanges[i]);
    remember();
  }

  // Throws, naming the rank, where a peer's header differs from ours.
  void check(const ProcessGroupOpenReg::Part& part, const Exchange& e) const {
    if (!e.theirs.defined()) return;
    const auto* mine = e.mine.const_data_ptr<uint8_t>();
    const int64_t blocks = part.agreement.peer >= 0 ? 1 : host->getSize();
    const int64_t stride = part.agreement.peer >= 0 ? kHeaderBytes : blockBytes();
    for (int64_t j = 0; j < blocks; ++j) {
      const auto* theirs = e.theirs.const_data_ptr<uint8_t>() + j * stride;
      if (std::memcmp(theirs, mine, kHeaderBytes) == 0) continue;
      int64_t got[kHeaderWords];
      std::memcpy(got, theirs, kHeaderBytes);
      const auto& a = part.agreement;
      const int other = a.peer >= 0 ? a.peer : static_cast<int>(j);
      // Same name, dtype and count but not inlined alike: a call of another
      // operation under the same name (all_gather and its coalesced form).
      const bool sameCollective =
          got[0] == a.collective && (got[3] == e.inlined || got[1] != a.dtype || got[2] != a.count);
      throw std::runtime_error(
          "ranks disagree: this rank's " + part.collective + " has " + std::to_string(a.count) + " x " +
          c10::toString(static_cast<at::ScalarType>(a.dtype)) + ", rank " + std::to_string(other) + "'s " +
          (sameCollective ? part.collective : std::string("call is another collective and")) + " has " +
          std::to_string(got[2]) + " x " + c10::toString(static_cast<at::ScalarType>(got[1])));
    }
  }

  // Every rank's inputs, as carried in the blocks of an inlined exchange.
  std::vector<at::Tensor> payloads(const ProcessGroupOpenReg::Part& part, const Exchange& e) const {
    const int64_t bytes = inlineBytes(part);
    std::vector<at::Tensor> out;
    for (int64_t r = 0; r < host->getSize(); ++r)
      out.push_back(e.theirs.narrow(0, r * blockBytes() + kHeaderBytes, bytes));
    return out;
  }

  // What the ranks just agreed on, for the sizes of later blocks: the bytes
  // of each part that could ride in a block (0 for those that never can).
  void remember() const {
    for (const auto& part : parts) {
      if (!part.agreement.check || part.agreement.peer >= 0) continue;
      int64_t bytes = 0;
      for (size_t i = part.first; part.combine && i < part.first + part.count; ++i) {
        if (reads[i]) bytes += static_cast<int64_t>(views[i].nbytes());
      }
      sizer->agreed(bytes <= maxInlineBytes(host->getSize()) ? bytes : 0);
    }
  }

  void run() {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    const std::vector<Exchange> exchanges = startExchange(works);
    if (!staged.empty()) {
      // The first chunk stages in while the headers travel.
      const auto checked = [&] { finishExchange(exchanges, works); };
      return runPipelined(*host, parts[0].pipeline, staged, copyStream.get(), kPipelineTag, checked);
    }
    finishExchange(exchanges, works);
    std::vector<std::vector<at::Tensor>> partViews;
    for (size_t i = 0; i < parts.size(); ++i) {
      auto& part = parts[i];
      partViews.emplace_back(views.begin() + part.first, views.begin() + part.first + part.count);
      if (exchanges[i].inlined) {
        part.combine(payloads(part, exchanges[i]), partViews.back());
      } else {
        works.push_back(part.start(*host, partViews.back()));
      }
    }
    for (auto& work : works) work->wait();
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].after) parts[i].after(partViews[i]);
    }
  }

  void operator()() {
    const std::string earlier = health->failure();
    if (!earlier.empty()) fail("not run, the group failed before: " + earlier);
    try {
      run();
    } catch (const c10::Error& e) {
      fail(e.what_without_backtrace());
    } catch (const std::exception& e) {
      fail(e.what());
    }
    outcome->succeed();
  }

  [[noreturn]] void fail(const std::string& reason) {
    const std::string message = description + " failed: " + reason;
    health->record(message);
    outcome->fail(distError(message));
    throw std::runtime_error(message);
  }
};

namespace {

int runTransfer(void* body, char* message, size_t capacity) {
  return backend::detail::runKernelBody([](void* b) { (*static_cast<TransferBody*>(b))(); }, body, message, capacity);
}

void destroyTransfer(void* body) { delete static_cast<TransferBody*>(body); }

void copyAsync(void* dst, const void* src, size_t bytes, orMemcpyKind kind, orStream_t stream) {
  if (bytes != 0) OPENREG_CHECK(orMemcpyAsync(dst, src, bytes, kind, stream));
}

void checkSameShape(const at::Tensor& expected, const at::Tensor& actual, const char* collective, const char* what) {
  TORCH_CHECK_VALUE(actual.numel() == expected.numel() && actual.scalar_type() == expected.scalar_type(),
                    "orccl: ", collective, ": ", what, " has ", actual.numel(), " elements of ", actual.scalar_type(),
                    ", expected ", expected.numel(), " of ", expected.scalar_type());
}

}  // namespace

ProcessGroupOpenReg::ProcessGroupOpenReg(c10::intrusive_ptr<c10d::Backend> host, int rank, int size,
                                         std::vector<int64_t> globalRanks, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), host_(std::move(host)), globalRanks_(std::move(globalRanks)), timeout_(timeout) {
  TORCH_CHECK(host_, "orccl: needs a host (Gloo) backend");
  TORCH_CHECK(host_->getSize() == size && host_->getRank() == rank, "orccl: the host backend has rank ",
              host_->getRank(), " of ", host_->getSize(), ", this group rank ", rank, " of ", size);
  if (globalRanks_.empty()) {
    for (int r = 0; r < size; ++r) globalRanks_.push_back(r);
  }
}

uint64_t ProcessGroupOpenReg::getSequenceNumberForGroup() {
  std::lock_guard lock(mutex_);
  return collectiveSeq_;
}

c10::Stream ProcessGroupOpenReg::communicationStream(c10::DeviceIndex device) {
  std::lock_guard lock(mutex_);
  auto found = streams_.find(device);
  if (found != streams_.end()) return found->second;
  // High priority, as NCCL's streams: communication should not queue
  // behind compute that was launched later.
  c10::Stream stream = backend::streamFromPool(device, backend::streamPriorityRange().second);
  streams_.emplace(device, stream);
  sizers_.emplace(device, std::make_shared<BlockSizer>());
  return stream;
}

int64_t ProcessGroupOpenReg::BlockSizer::payloadBytes() const {
  std::lock_guard lock(mutex_);
  const int64_t largest = *std::max_element(recent_.begin(), recent_.end());
  int64_t bytes = largest > 0 ? 64 : 0;  // powers of two: fewer distinct sizes to allocate
  while (bytes < largest) bytes *= 2;
  return bytes;
}

std::shared_ptr<orStream_st> ProcessGroupOpenReg::copyStream(c10::DeviceIndex device) {
  std::lock_guard lock(mutex_);
  auto found = copyStreams_.find(device);
  if (found != copyStreams_.end()) return found->second;
  // Its own stream, not one of the pool's: nothing else may run on its row.
  const c10::DeviceGuard onDevice(c10::Device(kDeviceType, device));
  orStream_t stream = nullptr;
  OPENREG_CHECK(orStreamCreate(&stream));
  // Destroying a stream does not block, so the last holder may be a transfer.
  std::shared_ptr<orStream_st> owned(stream, [](orStream_t s) { orStreamDestroy(s); });
  copyStreams_.emplace(device, owned);
  return owned;
}

// Large enough not to ride in the first exchange, and one collective of a
// shape the pipeline knows (a coalesced group moves as one Gloo call each).
bool ProcessGroupOpenReg::pipelines(const Request& request) const {
  if (size_ < 2 || request.parts.size() != 1 || request.parts[0].pipeline.shape == PipelineShape::None) return false;
  int64_t bytes = 0;
  for (const auto& slot : request.slots) {
    if (slot.read) bytes += static_cast<int64_t>(slot.tensor.nbytes());
  }
  return bytes > maxInlineBytes(size_);
}

std::shared_ptr<ProcessGroupOpenReg::BlockSizer> ProcessGroupOpenReg::blockSizer(c10::DeviceIndex device) {
  communicationStream(device);  // creates both
  std::lock_guard lock(mutex_);
  return sizers_.at(device);
}

void ProcessGroupOpenReg::BlockSizer::agreed(int64_t bytes) {
  std::lock_guard lock(mutex_);
  recent_[next_] = bytes;
  next_ = (next_ + 1) % recent_.size();
}

void ProcessGroupOpenReg::Health::record(const std::string& message) {
  std::lock_guard lock(mutex_);
  if (failure_.empty()) failure_ = message;
}

std::string ProcessGroupOpenReg::Health::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void ProcessGroupOpenReg::throwIfFailedBefore() {
  const std::string failure = health_->failure();
  TORCH_CHECK_WITH(DistBackendError, failure.empty(),
                   "orccl: the group is unusable after an earlier failure: ", failure);
}

c10::DeviceIndex ProcessGroupOpenReg::checkTensors(const Request& request) {
  const char* name = request.collective.c_str();
  // The group's device: bound at init (device_id), else the one its first
  // call used. A second device would size its first-exchange blocks from
  // another history (BlockSizer) and queue on another stream, out of order
  // with the peers: Gloo would abort the process.
  std::optional<c10::DeviceIndex> device;
  const char* why = "";
  if (auto bound = getBoundDeviceId()) {
    device = bound->index();
    why = " (the group's bound device)";
  } else {
    std::lock_guard lock(mutex_);
    device = firstDevice_;
    if (device) why = " (the group's device since its first call: one group serves one device per process)";
  }
  for (size_t i = 0; i < request.slots.size(); ++i) {
    const at::Tensor& t = request.slots[i].tensor;
    TORCH_CHECK_VALUE(t.defined(), "orccl: ", name, ": tensor ", i, " is undefined");
    TORCH_CHECK_VALUE(t.device().type() == kDeviceType, "orccl: ", name, " takes openreg tensors, but tensor ", i,
                      " is on ", t.device());
    TORCH_CHECK_VALUE(!device || *device == t.device().index(), "orccl: ", name, ": tensor ", i, " is on ", t.device(),
                      ", but this call uses openreg:", static_cast<int>(*device), why);
    device = t.device().index();
    TORCH_CHECK_VALUE(t.is_contiguous() && !t.is_sparse(), "orccl: ", name, ": tensor ", i,
                      " must be dense and contiguous");
    TORCH_CHECK_VALUE(supportedDtype(t.scalar_type()), "orccl: ", name, " does not support dtype ", t.scalar_type());
    TORCH_CHECK_VALUE(t.scalar_type() == request.dtype, "orccl: ", name, ": tensor ", i, " is ", t.scalar_type(),
                      " but the collective's dtype is ", request.dtype);
  }
  if (!device) device = backend::currentStream().device_index();
  std::lock_guard lock(mutex_);
  if (!firstDevice_) firstDevice_ = device;
  return *device;
}

std::string ProcessGroupOpenReg::describe(const Request& request, uint64_t sequence) const {
  std::string text = "orccl " + request.collective + " (group '" + getGroupUid() + "' " + getGroupDesc() + ", seq " +
                     std::to_string(sequence) + ", rank " + std::to_string(rank_) + " of " + std::to_string(size_);
  if (request.peer >= 0) return text + ", peer rank " + std::to_string(globalRanks_.at(request.peer)) + ")";
  std::vector<int64_t> peers;
  for (size_t r = 0; r < globalRanks_.size(); ++r) {
    if (static_cast<int>(r) != rank_) peers.push_back(globalRanks_[r]);
  }
  return text + ", peer ranks " + rankList(peers) + ")";
}

Work ProcessGroupOpenReg::launch(Request& request) {
  throwIfFailedBefore();
  const c10::DeviceIndex device = checkTensors(request);
  premultiplyInputs(request);
  Agreement agreement;
  agreement.check = request.matchCount >= 0;
  // By event stem: a send and its recv agree ("SendRecv"), SUM and MAX do not.
  agreement.collective = static_cast<int64_t>(std::hash<std::string>{}(request.eventStem) & 0x7fffffff);
  agreement.dtype = static_cast<int64_t>(request.dtype);
  agreement.count = request.matchCount;
  agreement.peer = request.peer;
  agreement.sends = request.opType == c10d::OpType::SEND;
  agreement.tag = request.tag;
  request.parts = {Part{std::move(request.start), std::move(request.after), 0, request.slots.size(), agreement,
                        request.collective, std::move(request.combine), request.pipeline}};
  if (coalescing_) return hold(request, device);
  return record(request, device, request.peer >= 0);
}

// Opens record_param_comms (NCCL's arguments) around the queueing.
Work ProcessGroupOpenReg::record(Request& request, c10::DeviceIndex device, bool p2p) {
  int64_t sequence;
  {
    std::lock_guard lock(mutex_);
    sequence = static_cast<int64_t>(p2p ? ++p2pSeq_ : ++collectiveSeq_);
  }
  std::vector<at::Tensor> inputs;
  for (const auto& slot : request.slots) {
    if (slot.read) inputs.push_back(slot.tensor);
  }
  const auto seqInfo = std::make_tuple(sequence, p2p);
  const auto groupName = std::make_tuple(getGroupUid(), getGroupDesc());
  const int rankStart = static_cast<int>(globalRanks_.front());
  const int rankStride = globalRanks_.size() < 2 ? 1 : static_cast<int>(globalRanks_[1] - globalRanks_[0]);
  // For point-to-point, NCCL reports the peer as "Rank" (shown as Src/Dst Rank).
  const int reportedRank = p2p && request.peer >= 0 ? request.peer : rank_;
  RECORD_PARAM_COMMS_DATA_WITH_ASYNC_OP(seqInfo, groupName, inputs, request.outputs, reportedRank,
                                        std::string(request.collective), request.inNelems, request.outNelems,
                                        request.dtype, request.inSplits, request.outSplits, rankStart, rankStride,
                                        size_, !request.blocking);
  return enqueue(request, device, static_cast<uint64_t>(sequence));
}

Work ProcessGroupOpenReg::hold(Request& request, c10::DeviceIndex device) {
  TORCH_CHECK_VALUE(!heldDevice_ || *heldDevice_ == device,
                    "orccl: coalesced calls must use one device, got openreg:", static_cast<int>(*heldDevice_),
                    " and openreg:", static_cast<int>(device));
  heldDevice_ = device;
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                         std::vector<c10::Device>{c10::Device(kDeviceType, device)});
  heldFutures_.push_back(future);
  held_.push_back(std::move(request));
  return c10d::Work::create_from_future(future);
}

void ProcessGroupOpenReg::startCoalescing() {
  TORCH_CHECK(!coalescing_, "orccl: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
  held_.clear();
  heldFutures_.clear();
  heldDevice_.reset();
}

Work ProcessGroupOpenReg::endCoalescing() {
  TORCH_CHECK(coalescing_, "orccl: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<Request> held = std::move(held_);
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> futures = std::move(heldFutures_);
  if (held.empty()) {
    auto done = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    done->markCompleted(c10::IValue(std::vector<at::Tensor>{}));
    return c10d::Work::create_from_future(done);
  }
  // One transfer for all: NCCL names such a group "coalesced".
  Request merged{c10d::OpType::COALESCED, "coalesced", held.front().eventStem};
  merged.dtype = held.front().dtype;
  bool p2p = true;
  for (auto& request : held) {
    for (auto& part : request.parts) {
      part.first += merged.slots.size();
      merged.parts.push_back(std::move(part));
    }
    merged.slots.insert(merged.slots.end(), request.slots.begin(), request.slots.end());
    merged.outputs.insert(merged.outputs.end(), request.outputs.begin(), request.outputs.end());
    merged.inNelems += request.inNelems;
    merged.outNelems += request.outNelems;
    p2p = p2p && request.peer >= 0;
  }
  if (held.size() == 1) merged.peer = held.front().peer;
  Work work = record(merged, *heldDevice_, p2p);
  // The held calls' futures complete with the group, on its stream.
  {
    c10::StreamGuard onComm(communicationStream(*heldDevice_));
    for (size_t i = 0; i < held.size(); ++i) futures[i]->markCompleted(c10::IValue(held[i].outputs));
  }
  return work;
}

namespace {

// Pinned mirrors of a request's slots, each a non-owning CPU view for the
// transfer; the inputs' device -> pinned copies are queued on `stream`
// unless the transfer stages them itself (pipelined: `staged` then lists
// both sides of every slot).
struct Staging {
  std::vector<at::Tensor> pinned;
  std::vector<at::Tensor> views;
  std::vector<StagedSlot> staged;
};

Staging stageIn(const std::vector<ProcessGroupOpenReg::Slot>& slots, orStream_t stream, bool pipelined) {
  Staging staging;
  staging.pinned.reserve(slots.size());
  staging.views.reserve(slots.size());
  for (const auto& slot : slots) {
    at::Tensor host = pinnedLike(slot.tensor);
    if (pipelined) {
      staging.staged.push_back({slot.tensor.data_ptr(), host.data_ptr(), static_cast<int64_t>(slot.tensor.nbytes())});
    } else if (slot.read) {
      copyAsync(host.data_ptr(), slot.tensor.const_data_ptr(), slot.tensor.nbytes(), orMemcpyDeviceToHost, stream);
    }
    staging.views.push_back(at::from_blob(host.data_ptr(), host.sizes(), host.strides(), host.options()));
    staging.pinned.push_back(std::move(host));
  }
  return staging;
}

// The outputs' pinned -> device copies, then record_stream semantics: the
// caller may drop its tensors at once, and the pinned buffers go back to the
// cache, each reused only after the communication stream passed it.
void stageOut(const std::vector<ProcessGroupOpenReg::Slot>& slots, const std::vector<at::Tensor>& pinned,
              const c10::Stream& comm, bool pipelined) {
  const orStream_t stream = backend::nativeStream(comm);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].write && !pipelined) {
      copyAsync(slots[i].tensor.data_ptr(), pinned[i].const_data_ptr(), slots[i].tensor.nbytes(), orMemcpyHostToDevice,
                stream);
    }
  }
  c10::impl::VirtualGuardImpl guard(kDeviceType);
  for (size_t i = 0; i < slots.size(); ++i) {
    backend::recordPinnedUse(pinned[i].storage().data_ptr(), comm);
    guard.recordDataPtrOnStream(slots[i].tensor.storage().data_ptr(), comm);
  }
}

// Completed now, on the communication stream, as NCCL's futures are: its
// wait() and then() order the caller's stream after the collective.
c10::intrusive_ptr<c10::ivalue::Future> completedFuture(const std::vector<at::Tensor>& outputs,
                                                        const c10::Stream& comm) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                         std::vector<c10::Device>{comm.device()});
  c10::StreamGuard onComm(comm);
  future->markCompleted(c10::IValue(outputs));
  return future;
}

}  // namespace

Work ProcessGroupOpenReg::enqueue(Request& request, c10::DeviceIndex device, uint64_t sequence) {
  const c10::Device where(kDeviceType, device);
  c10::DeviceGuard deviceGuard(where);
  c10::impl::VirtualGuardImpl guard(kDeviceType);
  const c10::Stream comm = communicationStream(device);
  // The collective reads what the caller's stream wrote before the call.
  c10::Event ready(kDeviceType);
  ready.record(guard.getStream(where));
  // Its half-dozen tasks reach the executor with one wake-up: woken once per
  // task, the executor takes each as it comes and competes with this thread
  // for the core while it queues the next.
  const StreamBatch batch(backend::nativeStream(comm));
  OPENREG_CHECK(batch.status());
  ready.block(comm);

  const bool pipelined = pipelines(request);
  Staging staging = stageIn(request.slots, backend::nativeStream(comm), pipelined);
  auto outcome = std::make_shared<CollectiveOutcome>();
  const std::string description = describe(request, sequence);
  std::vector<bool> reads;
  for (const auto& slot : request.slots) reads.push_back(slot.read);
  auto body =
      std::make_unique<TransferBody>(TransferBody{host_, std::move(request.parts), std::move(staging.views),
                                                  std::move(reads), outcome, health_, description, blockSizer(device)});
  if (pipelined) {
    body->staged = std::move(staging.staged);
    body->copyStream = copyStream(device);
  }
  launchTransfer(request, sequence, std::move(body), backend::nativeStream(comm));
  stageOut(request.slots, staging.pinned, comm, pipelined);
  c10::Event end(kDeviceType);
  end.record(comm);
  return c10::make_intrusive<WorkOpenReg>(rank_, request.opType, sequence, request.outputs, std::move(outcome),
                                          std::move(end), completedFuture(request.outputs, comm), request.blocking,
                                          timeout(), description);
}

// One orLaunchCollective: what profilers see of the collective, and its transfer.
void ProcessGroupOpenReg::launchTransfer(const Request& request, uint64_t sequence, std::unique_ptr<TransferBody> body,
                                         orStream_t stream) {
  const char* dataType = request.slots.empty() ? "" : backend::dtypeSuffix(request.dtype);
  const std::string eventName = "openregComm_" + request.eventStem + (request.slots.empty() ? "" : "_") + dataType;
  const std::string groupName = getGroupUid();
  uint64_t bytes = 0;
  for (const auto& slot : request.slots) {
    if (slot.read) bytes += slot.tensor.nbytes();
  }
  orCollectiveConfig config{};
  config.structSize = sizeof(config);
  config.name = eventName.c_str();
  config.collective = request.collective.c_str();
  config.dataType = dataType;
  config.groupName = groupName.c_str();
  config.count = static_cast<uint64_t>(request.inNelems);
  config.bytes = bytes;
  config.sequence = sequence;
  config.groupSize = static_cast<uint32_t>(size_);
  config.rank = rank_;
  config.peer = request.peer;
  config.func = &runTransfer;
  config.userData = body.get();
  config.userDataDestroy = &destroyTransfer;
  OPENREG_CHECK(orLaunchCollective(&config, stream));
  body.release();  // the runtime owns it now
}

void ProcessGroupOpenReg::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK_VALUE(timeout.count() > 0, "orccl: a group's timeout must be positive, got ", timeout.count(), " ms");
  host_->setTimeout(timeout);
  std::lock_guard lock(mutex_);
  timeout_ = timeout;
}

std::chrono::milliseconds ProcessGroupOpenReg::timeout() const {
  std::lock_guard lock(mutex_);
  return timeout_;
}

// ------------------------------------------------------------- operations

Work ProcessGroupOpenReg::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "orccl: allreduce takes one tensor per call, got ", tensors.size());
  at::Tensor& t = tensors[0];
  Request r{c10d::OpType::ALLREDUCE, "allreduce",
            std::string("AllReduce_") + reduceOpName(opts.reduceOp, t.scalar_type(), "allreduce")};
  r.reduceOp = opts.reduceOp;
  r.slots = {{t, true, true}};
  r.outputs = tensors;
  r.dtype = t.scalar_type();
  r.inNelems = r.outNelems = t.numel();
  r.matchCount = t.numel();
  const bool average = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
  TORCH_CHECK_VALUE(!(average && t.scalar_type() == at::kBool), "orccl: allreduce cannot average bool tensors");
  c10d::AllreduceOptions hostOpts = opts;
  hostOpts.reduceOp = hostReduceOp(opts.reduceOp);
  const int size = size_;
  r.start = [hostOpts](c10d::Backend& host, std::vector<at::Tensor>& views) { return host.allreduce(views, hostOpts); };
  r.combine = reduceInline(hostOpts.reduceOp);
  r.pipeline = {PipelineShape::AllReduce, hostOpts.reduceOp, average, r.dtype};
  r.after = [average, size](std::vector<at::Tensor>& views) {
    if (average) divideBy(views[0], size);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                              const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "orccl: allreduce_coalesced needs at least one tensor");
  Request r{c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced",
            std::string("AllReduce_") + reduceOpName(opts.reduceOp, tensors[0].scalar_type(), "allreduce_coalesced")};
  for (auto& t : tensors) r.slots.push_back({t, true, true});
  r.reduceOp = opts.reduceOp;
  r.outputs = tensors;
  r.dtype = tensors[0].scalar_type();
  r.inNelems = r.outNelems = totalNumel(tensors);
  r.matchCount = r.inNelems;
  const bool average = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
  c10d::AllreduceCoalescedOptions hostOpts = opts;
  hostOpts.reduceOp = hostReduceOp(opts.reduceOp);
  const int size = size_;
  r.start = [hostOpts](c10d::Backend& host, std::vector<at::Tensor>& views) {
    return host.allreduce_coalesced(views, hostOpts);
  };
  r.after = [average, size](std::vector<at::Tensor>& views) {
    if (average) {
      for (auto& view : views) divideBy(view, size);
    }
  };
  return launch(r);
}

Work ProcessGroupOpenReg::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "orccl: broadcast takes one tensor per call, got ", tensors.size());
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "orccl: broadcast root ", opts.rootRank,
                    " is not a rank of this group of ", size_);
  at::Tensor& t = tensors[0];
  const bool root = opts.rootRank == rank_;
  Request r{c10d::OpType::BROADCAST, "broadcast", "Broadcast"};
  r.slots = {{t, root, !root}};
  r.outputs = tensors;
  r.dtype = t.scalar_type();
  r.inNelems = r.outNelems = t.numel();
  r.matchCount = t.numel();
  c10d::BroadcastOptions hostOpts = opts;
  hostOpts.rootTensor = 0;
  r.start = [hostOpts](c10d::Backend& host, std::vector<at::Tensor>& views) { return host.broadcast(views, hostOpts); };
  return launch(r);
}

Work ProcessGroupOpenReg::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "orccl: reduce takes one tensor per call, got ", tensors.size());
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "orccl: reduce root ", opts.rootRank,
                    " is not a rank of this group of ", size_);
  at::Tensor& t = tensors[0];
  const bool root = opts.rootRank == rank_;
  Request r{c10d::OpType::REDUCE, "reduce",
            std::string("Reduce_") + reduceOpName(opts.reduceOp, t.scalar_type(), "reduce")};
  r.slots = {{t, true, root}};
  r.reduceOp = opts.reduceOp;
  r.outputs = tensors;
  r.dtype = t.scalar_type();
  r.inNelems = r.outNelems = t.numel();
  r.matchCount = t.numel();
  const bool average = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
  c10d::ReduceOptions hostOpts = opts;
  hostOpts.reduceOp = hostReduceOp(opts.reduceOp);
  hostOpts.rootTensor = 0;
  const int size = size_;
  r.start = [hostOpts](c10d::Backend& host, std::vector<at::Tensor>& views) { return host.reduce(views, hostOpts); };
  r.after = [average, root, size](std::vector<at::Tensor>& views) {
    if (average && root) divideBy(views[0], size);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(inputs.size() == 1 && outputs.size() == 1, "orccl: allgather takes one input and one output list");
  TORCH_CHECK_VALUE(static_cast<int>(outputs[0].size()) == size_, "orccl: allgather needs ", size_,
                    " output tensors (one per rank), got ", outputs[0].size());
  const at::Tensor& input = inputs[0];
  Request r{c10d::OpType::ALLGATHER, "allgather", "AllGather"};
  r.slots = {{input, true, false}};
  for (auto& out : outputs[0]) {
    checkSameShape(input, out, "allgather", "an output tensor");
    r.slots.push_back({out, false, true});
  }
  r.outputs = outputs[0];
  r.dtype = input.scalar_type();
  r.inNelems = input.numel();
  r.outNelems = input.numel() * size_;
  r.matchCount = input.numel();
  r.start = [opts](c10d::Backend& host, std::vector<at::Tensor>& views) {
    std::vector<at::Tensor> in{views[0]};
    std::vector<std::vector<at::Tensor>> out{std::vector<at::Tensor>(views.begin() + 1, views.end())};
    return host.allgather(out, in, opts);
  };
  r.combine = gatherInline(false);
  r.pipeline = {PipelineShape::AllGather, c10d::ReduceOp(), false, r.dtype};
  return launch(r);
}

Work ProcessGroupOpenReg::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size_, "orccl: all_gather_into_tensor: the output has ",
                    output.numel(), " elements, expected ", input.numel() * size_, " (input x group size)");
  Request r{c10d::OpType::_ALLGATHER_BASE, "_allgather_base", "AllGather"};
  r.slots = {{input, true, false}, {output, false, true}};
  r.outputs = {output};
  r.dtype = input.scalar_type();
  r.inNelems = input.numel();
  r.outNelems = output.numel();
  r.matchCount = input.numel();
  r.start = [opts](c10d::Backend& host, std::vector<at::Tensor>& views) {
    return host._allgather_base(views[1], views[0], opts);
  };
  r.combine = gatherInline(true);
  r.pipeline = {PipelineShape::AllGather, c10d::ReduceOp(), false, r.dtype};
  return launch(r);
}

Work ProcessGroupOpenReg::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(!inputs.empty() && inputs.size() == outputs.size(),
                    "orccl: allgather_into_tensor_coalesced needs as many outputs as inputs");
  Request r{c10d::OpType::COALESCED, "allgather_into_tensor_coalesced", "AllGather"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK_VALUE(outputs[i].numel() == inputs[i].numel() * size_,
                      "orccl: allgather_into_tensor_coalesced: output ", i, " has ", outputs[i].numel(),
                      " elements, expected ", inputs[i].numel() * size_);
    r.slots.push_back({inputs[i], true, false});
  }
  for (auto& out : outputs) r.slots.push_back({out, false, true});
  r.outputs = outputs;
  r.dtype = inputs[0].scalar_type();
  r.inNelems = totalNumel(inputs);
  r.outNelems = totalNumel(outputs);
  r.matchCount = r.inNelems;
  const size_t n = inputs.size();
  r.start = [opts, n](c10d::Backend& host, std::vector<at::Tensor>& views) {
    std::vector<at::Tensor> in(views.begin(), views.begin() + n);
    std::vector<at::Tensor> out(views.begin() + n, views.end());
    return host.allgather_into_tensor_coalesced(out, in, opts);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::GatherOptions& opts) {
  TORCH_CHECK_VALUE(inputs.size() == 1, "orccl: gather takes one input tensor");
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "orccl: gather root ", opts.rootRank,
                    " is not a rank of this group of ", size_);
  const bool root = opts.rootRank == rank_;
  const at::Tensor& input = inputs[0];
  Request r{c10d::OpType::GATHER, "gather", "Gather"};
  r.slots = {{input, true, false}};
  if (root) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "orccl: gather needs ",
                      size_, " output tensors on the root");
    for (auto& out : outputs[0]) {
      checkSameShape(input, out, "gather", "an output tensor");
      r.slots.push_back({out, false, true});
    }
    r.outputs = outputs[0];
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || outputs[0].empty(), "orccl: gather takes output tensors only on the root");
  }
  r.dtype = input.scalar_type();
  r.inNelems = input.numel();
  r.outNelems = root ? input.numel() * size_ : 0;
  r.matchCount = input.numel();
  r.start = [opts, root](c10d::Backend& host, std::vector<at::Tensor>& views) {
    std::vector<at::Tensor> in{views[0]};
    std::vector<std::vector<at::Tensor>> out;
    if (root) out.emplace_back(views.begin() + 1, views.end());
    return host.gather(out, in, opts);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                  const c10d::ScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == 1, "orccl: scatter takes one output tensor");
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "orccl: scatter root ", opts.rootRank,
                    " is not a rank of this group of ", size_);
  const bool root = opts.rootRank == rank_;
  const at::Tensor& output = outputs[0];
  Request r{c10d::OpType::SCATTER, "scatter", "Scatter"};
  r.slots = {{output, false, true}};
  if (root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "orccl: scatter needs ", size_,
                      " input tensors on the root");
    for (auto& in : inputs[0]) {
      checkSameShape(output, in, "scatter", "an input tensor");
      r.slots.push_back({in, true, false});
    }
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || inputs[0].empty(), "orccl: scatter takes input tensors only on the root");
  }
  r.outputs = outputs;
  r.dtype = output.scalar_type();
  r.inNelems = root ? output.numel() * size_ : 0;
  r.outNelems = output.numel();
  r.matchCount = output.numel();
  r.start = [opts, root](c10d::Backend& host, std::vector<at::Tensor>& views) {
    std::vector<at::Tensor> out{views[0]};
    std::vector<std::vector<at::Tensor>> in;
    if (root) in.emplace_back(views.begin() + 1, views.end());
    return host.scatter(out, in, opts);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == 1 && inputs.size() == 1,
                    "orccl: reduce_scatter takes one output and one input list");
  TORCH_CHECK_VALUE(static_cast<int>(inputs[0].size()) == size_, "orccl: reduce_scatter needs ", size_,
                    " input tensors (one per rank), got ", inputs[0].size());
  const at::Tensor& output = outputs[0];
  Request r{c10d::OpType::REDUCE_SCATTER, "reduce_scatter",
            std::string("ReduceScatter_") + reduceOpName(opts.reduceOp, output.scalar_type(), "reduce_scatter")};
  r.slots = {{output, false, true}};
  for (auto& in : inputs[0]) {
    checkSameShape(output, in, "reduce_scatter", "an input tensor");
    r.slots.push_back({in, true, false});
  }
  r.reduceOp = opts.reduceOp;
  r.outputs = outputs;
  r.dtype = output.scalar_type();
  r.inNelems = output.numel() * size_;
  r.outNelems = output.numel();
  r.matchCount = output.numel();
  const bool average = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
  c10d::ReduceScatterOptions hostOpts = opts;
  hostOpts.reduceOp = hostReduceOp(opts.reduceOp);
  const int size = size_;
  r.start = [hostOpts](c10d::Backend& host, std::vector<at::Tensor>& views) {
    std::vector<at::Tensor> out{views[0]};
    std::vector<std::vector<at::Tensor>> in{std::vector<at::Tensor>(views.begin() + 1, views.end())};
    return host.reduce_scatter(out, in, hostOpts);
  };
  r.combine = reduceScatterInline(hostOpts.reduceOp, rank_);
  r.pipeline = {PipelineShape::ReduceScatter, hostOpts.reduceOp, average, r.dtype};
  r.after = [average, size](std::vector<at::Tensor>& views) {
    if (average) divideBy(views[0], size);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                               const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size_, "orccl: reduce_scatter_tensor: the input has ",
                    input.numel(), " elements, expected ", output.numel() * size_, " (output x group size)");
  Request r{c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base",
            std::string("ReduceScatter_") + reduceOpName(opts.reduceOp, input.scalar_type(), "reduce_scatter_tensor")};
  r.slots = {{output, false, true}, {input, true, false}};
  r.reduceOp = opts.reduceOp;
  r.outputs = {output};
  r.dtype = input.scalar_type();
  r.inNelems = input.numel();
  r.outNelems = output.numel();
  r.matchCount = output.numel();
  const bool average = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
  c10d::ReduceScatterOptions hostOpts = opts;
  hostOpts.reduceOp = hostReduceOp(opts.reduceOp);
  const int size = size_;
  r.start = [hostOpts](c10d::Backend& host, std::vector<at::Tensor>& views) {
    return host._reduce_scatter_base(views[0], views[1], hostOpts);
  };
  r.combine = reduceScatterInline(hostOpts.reduceOp, rank_);
  r.pipeline = {PipelineShape::ReduceScatter, hostOpts.reduceOp, average, r.dtype};
  r.after = [average, size](std::vector<at::Tensor>& views) {
    if (average) divideBy(views[0], size);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(!inputs.empty() && inputs.size() == outputs.size(),
                    "orccl: reduce_scatter_tensor_coalesced needs as many outputs as inputs");
  Request r{c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced",
            std::string("ReduceScatter_") +
                reduceOpName(opts.reduceOp, inputs[0].scalar_type(), "reduce_scatter_tensor_coalesced")};
  for (size_t i = 0; i < outputs.size(); ++i) {
    TORCH_CHECK_VALUE(inputs[i].numel() == outputs[i].numel() * size_, "orccl: reduce_scatter_tensor_coalesced: input ",
                      i, " has ", inputs[i].numel(), " elements, expected ", outputs[i].numel() * size_);
    r.slots.push_back({outputs[i], false, true});
  }
  for (auto& in : inputs) r.slots.push_back({in, true, false});
  r.reduceOp = opts.reduceOp;
  r.outputs = outputs;
  r.dtype = inputs[0].scalar_type();
  r.inNelems = totalNumel(inputs);
  r.outNelems = totalNumel(outputs);
  r.matchCount = r.outNelems;
  const bool average = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
  c10d::ReduceScatterOptions hostOpts = opts;
  hostOpts.reduceOp = hostReduceOp(opts.reduceOp);
  const int size = size_;
  const size_t n = outputs.size();
  r.start = [hostOpts, n](c10d::Backend& host, std::vector<at::Tensor>& views) {
    std::vector<at::Tensor> out(views.begin(), views.begin() + n);
    std::vector<at::Tensor> in(views.begin() + n, views.end());
    return host.reduce_scatter_tensor_coalesced(out, in, hostOpts);
  };
  r.after = [average, size, n](std::vector<at::Tensor>& views) {
    if (!average) return;
    for (size_t i = 0; i < n; ++i) divideBy(views[i], size);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                        std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  const bool even = outputSplits.empty() && inputSplits.empty();
  if (even) {
    TORCH_CHECK_VALUE(input.numel() == output.numel() && input.size(0) % size_ == 0,
                      "orccl: all_to_all_single: input and output must have the same size, divisible by ", size_);
  }
  Request r{c10d::OpType::ALLTOALL_BASE, even ? "all_to_all" : "all_to_allv", "AllToAll"};
  r.slots = {{input, true, false}, {output, false, true}};
  r.outputs = {output};
  r.dtype = input.scalar_type();
  r.inNelems = input.numel();
  r.outNelems = output.numel();
  r.matchCount = even ? input.numel() : 0;  // split sizes may differ by rank
  r.inSplits = inputSplits;
  r.outSplits = outputSplits;
  r.start = [opts, outputSplits, inputSplits](c10d::Backend& host, std::vector<at::Tensor>& views) mutable {
    return host.alltoall_base(views[1], views[0], outputSplits, inputSplits, opts);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                   const c10d::AllToAllOptions& opts) {
  TORCH_CHECK_VALUE(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
                    "orccl: all_to_all needs ", size_, " input and output tensors, got ", inputs.size(), " and ",
                    outputs.size());
  Request r{c10d::OpType::ALLTOALL, "all_to_all", "AllToAll"};
  for (auto& in : inputs) r.slots.push_back({in, true, false});
  for (auto& out : outputs) r.slots.push_back({out, false, true});
  r.outputs = outputs;
  r.dtype = inputs[0].scalar_type();
  r.inNelems = totalNumel(inputs);
  r.outNelems = totalNumel(outputs);
  r.matchCount = 0;  // per-peer sizes may differ
  const size_t n = inputs.size();
  r.start = [opts, n](c10d::Backend& host, std::vector<at::Tensor>& views) {
    std::vector<at::Tensor> in(views.begin(), views.begin() + n);
    std::vector<at::Tensor> out(views.begin() + n, views.end());
    return host.alltoall(out, in, opts);
  };
  return launch(r);
}

ProcessGroupOpenReg::Request ProcessGroupOpenReg::pointToPoint(c10d::OpType type, std::vector<at::Tensor>& tensors,
                                                               int peer, int tag) const {
  const bool sending = type == c10d::OpType::SEND;
  const char* what = sending ? "send" : "recv";
  TORCH_CHECK_VALUE(tensors.size() == 1, "orccl: ", what, " takes one tensor");
  TORCH_CHECK_VALUE(peer >= 0 && peer < size_ && peer != rank_, "orccl: ", what, sending ? " to rank " : " from rank ",
                    peer, sending ? " from rank " : " on rank ", rank_, " of ", size_);
  TORCH_CHECK_VALUE(tag != kExchangeTag && tag != kPipelineTag, "orccl: ", what, ": tag ", tag,
                    " is reserved for orccl's own messages (the first exchange of every collective and the chunks of "
                    "large ones)");
  Request r{type, what, "SendRecv"};
  r.slots = {{tensors[0], sending, !sending}};
  r.outputs = tensors;
  r.dtype = tensors[0].scalar_type();
  r.inNelems = r.outNelems = tensors[0].numel();
  r.peer = peer;
  r.matchCount = tensors[0].numel();
  r.tag = tag;
  return r;
}

Work ProcessGroupOpenReg::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  Request r = pointToPoint(c10d::OpType::SEND, tensors, dstRank, tag);
  r.start = [dstRank, tag](c10d::Backend& host, std::vector<at::Tensor>& views) {
    return host.send(views, dstRank, tag);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  Request r = pointToPoint(c10d::OpType::RECV, tensors, srcRank, tag);
  r.start = [srcRank, tag](c10d::Backend& host, std::vector<at::Tensor>& views) {
    return host.recv(views, srcRank, tag);
  };
  return launch(r);
}

Work ProcessGroupOpenReg::barrier(const c10d::BarrierOptions& opts) {
  Request r{c10d::OpType::BARRIER, "barrier", "Barrier"};
  r.dtype = at::kByte;
  r.blocking = true;
  c10d::BarrierOptions hostOpts;
  hostOpts.timeout = opts.timeout;
  r.start = [hostOpts](c10d::Backend& host, std::vector<at::Tensor>& views) { return host.barrier(hostOpts); };
  return launch(r);
}

}  // namespace openreg::distributed

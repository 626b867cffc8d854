#include "distributed/Pipeline.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

namespace openreg::distributed {
namespace {

using Work = c10::intrusive_ptr<c10d::Work>;

// Chunks are large: every Gloo message costs a few hundred microseconds of
// wake-ups on a loaded host (measured: 2 MiB as eight messages took 1.6x as
// long as one), so a collective pipelines over a few chunks, not many.
// all_reduce's chunks are Gloo all_reduces of their own, each several
// messages per rank, so they are larger still.
constexpr int64_t kMinChunkBytes = 2 << 20;
constexpr int64_t kMaxChunkBytes = 4 << 20;
constexpr int64_t kMinAllReduceChunkBytes = 4 << 20;
constexpr int64_t kMaxAllReduceChunkBytes = 16 << 20;
// How many chunks a collective aims for: enough that copies overlap the
// transfer, few enough that per-message costs stay small.
constexpr int64_t kChunksPerPiece = 4;
constexpr int64_t kChunksPerAllReduce = 2;

// A power of two in [least, most], near bytes / chunks.
int64_t chunkBytes(int64_t bytes, int64_t chunks, int64_t least, int64_t most) {
  int64_t chunk = least;
  while (chunk < bytes / chunks && chunk < most) chunk *= 2;
  return chunk;
}

// Device memory and its pinned mirror.
struct Piece {
  uint8_t* device = nullptr;
  uint8_t* pinned = nullptr;
  int64_t bytes = 0;
};

// Bytes [offset, offset + bytes) of a piece, clipped to it.
struct Span {
  int64_t offset;
  int64_t bytes;
};

Piece pieceOf(const StagedSlot& slot, int64_t offset, int64_t bytes) {
  return {static_cast<uint8_t*>(slot.device) + offset, static_cast<uint8_t*>(slot.pinned) + offset, bytes};
}

at::Tensor bytesAt(uint8_t* data, int64_t bytes) { return at::from_blob(data, {bytes}, at::kByte); }

void stage(void* dst, const void* src, int64_t bytes, orMemcpyKind kind, orStream_t copyStream) {
  if (bytes == 0) return;
  const orError_t status = orCollectiveCopy(dst, src, static_cast<size_t>(bytes), kind, copyStream);
  if (status != orSuccess) throw std::runtime_error(std::string("staging copy: ") + orGetLastErrorMessage());
}

// Where a peer's chunks of this rank's piece wait to be reduced: a ring of
// kScratchDepth chunks per peer, kept by the executor thread between calls
// (fresh memory each call would pay its page faults every time).
constexpr int64_t kScratchDepth = 4;

uint8_t* scratchOfThisThread(int64_t bytes) {
  thread_local std::unique_ptr<uint8_t[]> buffer;
  thread_local int64_t capacity = 0;
  if (capacity < bytes) {
    buffer.reset(new uint8_t[bytes]);
    capacity = bytes;
  }
  return buffer.get();
}

class Pipeline {
 public:
  Pipeline(c10d::Backend& host, const PipelineSpec& spec, const std::vector<StagedSlot>& slots, orStream_t copyStream,
           int tag)
      : host_(host), spec_(spec), copyStream_(copyStream), tag_(tag), rank_(host.getRank()), size_(host.getSize()) {
    if (spec_.shape == PipelineShape::AllReduce) {
      mine_ = pieceOf(slots[0], 0, slots[0].bytes);
      chunk_ = chunkBytes(mine_.bytes, kChunksPerAllReduce, kMinAllReduceChunkBytes, kMaxAllReduceChunkBytes);
      steps_ = (mine_.bytes + chunk_ - 1) / chunk_;
      return;
    }
    mine_ = pieceOf(slots[0], 0, slots[0].bytes);
    for (int r = 0; r < size_; ++r) {
      byRank_.push_back(slots.size() == 2 ? pieceOf(slots[1], r * mine_.bytes, mine_.bytes)
                                          : pieceOf(slots[1 + r], 0, slots[1 + r].bytes));
    }
    chunk_ = chunkBytes(mine_.bytes, kChunksPerPiece, kMinChunkBytes, kMaxChunkBytes);
    steps_ = (mine_.bytes + chunk_ - 1) / chunk_;
    if (spec_.shape == PipelineShape::ReduceScatter)
      scratch_ = scratchOfThisThread((size_ - 1) * kScratchDepth * chunk_);
  }

  void run(const std::function<void()>& checked) {
    if (steps_ == 0) return checked();
    stageIn(0);
    // Nothing is posted before the sizes agree: a message of another size
    // would abort Gloo.
    checked();
    switch (spec_.shape) {
      case PipelineShape::AllReduce:
        return allReduce();
      case PipelineShape::AllGather:
        gather();
        break;
      default:
        reduceScatter();
    }
    for (auto& work : sends_) work->wait();
  }

 private:
  // all_reduce: each chunk is a Gloo all_reduce of its own (its ring moves
  // the least per rank), started as soon as the chunk is staged in; the next
  // chunk stages in while it runs on Gloo's threads, and the one before
  // stages out.
  void allReduce() {
    c10d::AllreduceOptions options;
    options.reduceOp = spec_.op;
    std::vector<Work> running(steps_);
    try {
      for (int64_t step = 0; step < steps_; ++step) {
        if (step > 0) stageIn(step);
        std::vector<at::Tensor> chunk{typedChunk(mine_, step)};
        running[step] = host_.allreduce(chunk, options);
        if (step > 0) finishAllReduce(step - 1, running);
      }
      finishAllReduce(steps_ - 1, running);
    } catch (...) {
      settle(running);
      throw;
    }
  }

  // A chunk's all_reduce runs on ProcessGroupGloo's worker threads, which
  // keep it past our Work: let every one started end (Gloo's timeout bounds
  // it) before the failure frees the pinned memory it writes for reuse.
  // Point-to-point messages need no such wait: Gloo stops using a buffer
  // once its Work is destroyed.
  static void settle(std::vector<Work>& running) {
    for (auto& work : running) {
      if (!work) continue;
      try {
        work->wait();
      } catch (...) {  // the first failure is the one reported
      }
    }
  }

  void finishAllReduce(int64_t step, std::vector<Work>& running) {
    running[step]->wait();
    if (spec_.average) {
      at::Tensor values = typedChunk(mine_, step);
      divideBy(values, size_);
    }
    copyOut(mine_.pinned, mine_, step);
  }

  // all_gather: every peer's chunks arrive straight into their pieces; this
  // rank's chunks leave as soon as they are staged in.
  void gather() {
    std::vector<std::vector<Work>> arrivals(size_);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_) arrivals[peer] = receiveAll(peer);
    }
    sendToPeers(0);
    for (int64_t step = 0; step < steps_; ++step) {
      if (step + 1 < steps_) {
        stageIn(step + 1);
        sendToPeers(step + 1);
      }
      copyOut(mine_.pinned, byRank_[rank_], step);
      for (int peer = 0; peer < size_; ++peer) {
        if (peer == rank_) continue;
        arrivals[peer][step]->wait();
        copyOut(byRank_[peer].pinned, byRank_[peer], step);
      }
    }
  }

  // reduce_scatter: each peer's piece goes to that peer and the peers'
  // chunks of this rank's piece come into the scratch ring, to be reduced
  // into the output and staged out.
  void reduceScatter() {
    std::vector<std::vector<Work>> contributions(steps_, std::vector<Work>(size_));
    for (int64_t step = 0; step < std::min(steps_, kScratchDepth); ++step) receiveContributions(step, contributions);
    sendPieces(0);
    for (int64_t step = 0; step < steps_; ++step) {
      if (step + 1 < steps_) {
        stageIn(step + 1);
        sendPieces(step + 1);
      }
      for (auto& work : contributions[step]) {
        if (work) work->wait();
      }
      reduce(step);
      if (step + kScratchDepth < steps_) receiveContributions(step + kScratchDepth, contributions);
      copyOut(mine_.pinned, mine_, step);
    }
  }

  Span span(const Piece& piece, int64_t step) const {
    const int64_t offset = std::min(step * chunk_, piece.bytes);
    return {offset, std::min(chunk_, piece.bytes - offset)};
  }

  // What leaves the device for a step: reduce_scatter's every piece, this
  // rank's buffer or input otherwise.
  void stageIn(int64_t step) {
    if (spec_.shape != PipelineShape::ReduceScatter) return copyIn(mine_, step);
    for (const auto& piece : byRank_) copyIn(piece, step);
  }

  void copyIn(const Piece& piece, int64_t step) {
    const Span s = span(piece, step);
    stage(piece.pinned + s.offset, piece.device + s.offset, s.bytes, orMemcpyDeviceToHost, copyStream_);
  }

  void copyOut(uint8_t* pinned, const Piece& piece, int64_t step) {
    const Span s = span(piece, step);
    stage(piece.device + s.offset, pinned + s.offset, s.bytes, orMemcpyHostToDevice, copyStream_);
  }

  at::Tensor typedChunk(const Piece& piece, int64_t step) const {
    const Span s = span(piece, step);
    return bytesAt(piece.pinned + s.offset, s.bytes).view(spec_.dtype);
  }

  // One receive per step of a peer's piece, in step order (Gloo matches a
  // peer's messages of one tag in order). Empty chunks post none.
  std::vector<Work> receiveAll(int peer) {
    std::vector<Work> works(steps_);
    for (int64_t step = 0; step < steps_; ++step) {
      const Span s = span(byRank_[peer], step);
      works[step] = post(false, peer, byRank_[peer].pinned + s.offset, s.bytes);
    }
    return works;
  }

  void receiveContributions(int64_t step, std::vector<std::vector<Work>>& contributions) {
    const int64_t bytes = span(byRank_[rank_], step).bytes;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_) contributions[step][peer] = post(false, peer, scratchFor(peer, step), bytes);
    }
  }

  // all_gather: this rank's chunk to every peer.
  void sendToPeers(int64_t step) {
    const Span s = span(mine_, step);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_) keepSend(post(true, peer, mine_.pinned + s.offset, s.bytes));
    }
  }

  // reduce_scatter: each peer its own piece's chunk.
  void sendPieces(int64_t step) {
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      const Span s = span(byRank_[peer], step);
      keepSend(post(true, peer, byRank_[peer].pinned + s.offset, s.bytes));
    }
  }

  Work post(bool send, int peer, uint8_t* data, int64_t bytes) {
    if (bytes == 0) return {};
    std::vector<at::Tensor> message{bytesAt(data, bytes)};
    return send ? host_.send(message, peer, tag_) : host_.recv(message, peer, tag_);
  }

  // Sends complete on their own; all are waited for at the end, so that a
  // failed one is reported.
  void keepSend(Work work) {
    if (work) sends_.push_back(std::move(work));
  }

  uint8_t* scratchFor(int peer, int64_t step) const {
    const int64_t slot = (peer < rank_ ? peer : peer - 1) * kScratchDepth + step % kScratchDepth;
    return scratch_ + slot * chunk_;
  }

  // The chunk of this rank's piece reduced over ranks into the output: this
  // rank's own values first, then the peers' in rank order.
  void reduce(int64_t step) {
    const Span s = span(byRank_[rank_], step);
    if (s.bytes == 0) return;
    const auto chunkOf = [&](int r) {
      uint8_t* data = r == rank_ ? byRank_[rank_].pinned + s.offset : scratchFor(r, step);
      return bytesAt(data, s.bytes).view(spec_.dtype);
    };
    at::Tensor out = bytesAt(mine_.pinned + s.offset, s.bytes).view(spec_.dtype);
    const int firstPeer = rank_ == 0 ? 1 : 0;
    combineInto(out, chunkOf(rank_), chunkOf(firstPeer), spec_.op);
    for (int r = firstPeer + 1; r < size_; ++r) {
      if (r != rank_) reduceInto(out, chunkOf(r), spec_.op);
    }
    if (spec_.average) divideBy(out, size_);
  }

  c10d::Backend& host_;
  const PipelineSpec spec_;
  const orStream_t copyStream_;
  const int tag_;
  const int rank_;
  const int size_;
  Piece mine_;                 // all_reduce's buffer, all_gather's input, reduce_scatter's output
  std::vector<Piece> byRank_;  // all_gather's output, reduce_scatter's input, by rank
  int64_t chunk_ = 0;
  int64_t steps_ = 0;
  uint8_t* scratch_ = nullptr;  // reduce_scatter: kScratchDepth chunks per peer
  std::vector<Work> sends_;
};

}  // namespace

void combineInto(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::PRODUCT:
      at::mul_out(out, a, b);
      return;
    case c10d::ReduceOp::MIN:
      at::minimum_out(out, a, b);
      return;
    case c10d::ReduceOp::MAX:
      at::maximum_out(out, a, b);
      return;
    case c10d::ReduceOp::BAND:
      at::bitwise_and_out(out, a, b);
      return;
    case c10d::ReduceOp::BOR:
      at::bitwise_or_out(out, a, b);
      return;
    case c10d::ReduceOp::BXOR:
      at::bitwise_xor_out(out, a, b);
      return;
    default:
      at::add_out(out, a, b);
  }
}

// Elementwise ops take an output that aliases an input.
void reduceInto(at::Tensor& out, const at::Tensor& x, const c10d::ReduceOp& op) { combineInto(out, out, x, op); }

void divideBy(at::Tensor& values, int divisor) {
  if (at::isFloatingType(values.scalar_type())) {
    values.div_(divisor);
  } else {
    values.div_(divisor, "trunc");
  }
}

void runPipelined(c10d::Backend& host, const PipelineSpec& spec, const std::vector<StagedSlot>& slots,
                  orStream_t copyStream, int tag, const std::function<void()>& checked) {
  Pipeline(host, spec, slots, copyStream, tag).run(checked);
}

}  // namespace openreg::distributed

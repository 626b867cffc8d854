// The fused recurrent cells ATen's LSTM and GRU layers call on a PrivateUse1
// device (as on CUDA): _thnn_fused_lstm_cell, _thnn_fused_gru_cell and their
// backwards. CPU has no kernel for them, so the bodies compute the cells'
// pointwise math here; each pass is one fused elementwise kernel over the
// batch x hidden elements (the gate GEMMs are separate addmm/mm kernels).
// Half and bfloat16 compute in float, as CUDA's cells accumulate.
//
// Workspaces (saved by autograd between a cell and its backward):
//   LSTM [B, 4H]: the activated gates i, f, g, o;
//   GRU  [B, 5H]: r, z, n, hx and the hidden half of the new gate (W_hn h + b_hn).
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

at::Tensor computeCopy(const at::Tensor& t) {
  const bool reduced = t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
  return reduced ? t.to(at::kFloat) : t;
}

std::optional<TensorDesc> describeOptional(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? std::optional<TensorDesc>(describeTensor(*t)) : std::nullopt;
}

// Input and hidden gates summed with both biases, in the compute dtype.
at::Tensor gatesWithBias(const TensorDesc& inputGates, const TensorDesc& hiddenGates,
                         const std::optional<TensorDesc>& inputBias, const std::optional<TensorDesc>& hiddenBias) {
  at::Tensor gates = computeCopy(inputGates.view()) + computeCopy(hiddenGates.view());
  if (inputBias.has_value()) gates = gates + computeCopy(inputBias->view());
  if (hiddenBias.has_value()) gates = gates + computeCopy(hiddenBias->view());
  return gates;
}

void checkCell(const char* name, const at::Tensor& inputGates, const at::Tensor& hiddenGates, const at::Tensor& state,
               const std::optional<at::Tensor>& inputBias, const std::optional<at::Tensor>& hiddenBias,
               int64_t gateCount) {
  TORCH_CHECK(state.dim() == 2, name, ": expected a 2-d hidden state, got ", state.dim(), "-d");
  const int64_t batch = state.size(0);
  const int64_t width = gateCount * state.size(1);
  for (const at::Tensor* gates : {&inputGates, &hiddenGates}) {
    TORCH_CHECK(gates->dim() == 2 && gates->size(0) == batch && gates->size(1) == width, name,
                ": expected gates of size [", batch, ", ", width, "], got ", gates->sizes());
    TORCH_CHECK(gates->scalar_type() == state.scalar_type(), name, ": expected gates of dtype ", state.scalar_type(),
                ", got ", gates->scalar_type());
  }
  for (const std::optional<at::Tensor>* bias : {&inputBias, &hiddenBias}) {
    if (!bias->has_value() || !(*bias)->defined()) continue;
    TORCH_CHECK((*bias)->dim() == 1 && (*bias)->size(0) == width, name, ": expected a bias of ", width,
                " elements, got ", (*bias)->sizes());
  }
  TORCH_CHECK(at::isFloatingType(state.scalar_type()), name, ": expected a floating dtype, got ", state.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fusedLstmCell(const at::Tensor& inputGates,
                                                             const at::Tensor& hiddenGates, const at::Tensor& cx,
                                                             const std::optional<at::Tensor>& inputBias,
                                                             const std::optional<at::Tensor>& hiddenBias) {
  static const c10::OperatorHandle kOp = findOp("aten::_thnn_fused_lstm_cell", "");
  const c10::Device device = commonDevice(refArgs(inputGates, hiddenGates, cx, inputBias, hiddenBias), kOp);
  c10::DeviceGuard guard(device);
  checkCell("_thnn_fused_lstm_cell", inputGates, hiddenGates, cx, inputBias, hiddenBias, 4);
  at::Tensor hy = emptyDevice(cx.sizes(), cx.scalar_type());
  at::Tensor cy = emptyDevice(cx.sizes(), cx.scalar_type());
  at::Tensor workspace = emptyDevice(inputGates.sizes(), cx.scalar_type());
  if (cx.numel() == 0) return {hy, cy, workspace};
  launchKernel(streamFor(cx), kernelName("lstm_cell_fwd_fused", cx.scalar_type()), elementwiseShape(cx.numel()),
               [ig = describeTensor(inputGates), hg = describeTensor(hiddenGates), c = describeTensor(cx),
                ib = describeOptional(inputBias), hb = describeOptional(hiddenBias), h1 = describeTensor(hy),
                c1 = describeTensor(cy), ws = describeTensor(workspace)]() {
                 const auto chunks = gatesWithBias(ig, hg, ib, hb).chunk(4, 1);
                 const at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid();
                 const at::Tensor g = chunks[2].tanh(), o = chunks[3].sigmoid();
                 const at::Tensor cNext = f * computeCopy(c.view()) + i * g;
                 h1.view().copy_(o * cNext.tanh());
                 c1.view().copy_(cNext);
                 ws.view().copy_(at::cat({i, f, g, o}, 1));
               });
  return {hy, cy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fusedLstmCellBackward(const std::optional<at::Tensor>& gradHy,
                                                                     const std::optional<at::Tensor>& gradCy,
                                                                     const at::Tensor& cx, const at::Tensor& cy,
                                                                     const at::Tensor& workspace, bool hasBias) {
  static const c10::OperatorHandle kOp = findOp("aten::_thnn_fused_lstm_cell_backward_impl", "");
  const c10::Device device = commonDevice(refArgs(gradHy, gradCy, cx, cy, workspace), kOp);
  c10::DeviceGuard guard(device);
  TORCH_CHECK(cx.dim() == 2 && cy.sizes() == cx.sizes(), "_thnn_fused_lstm_cell_backward: cx ", cx.sizes(), " and cy ",
              cy.sizes(), " must be the same 2-d size");
  TORCH_CHECK(workspace.dim() == 2 && workspace.size(0) == cx.size(0) && workspace.size(1) == 4 * cx.size(1),
              "_thnn_fused_lstm_cell_backward: expected a workspace of size [", cx.size(0), ", ", 4 * cx.size(1),
              "], got ", workspace.sizes());
  for (const std::optional<at::Tensor>* grad : {&gradHy, &gradCy})
    if (grad->has_value() && (*grad)->defined())
      TORCH_CHECK((*grad)->sizes() == cx.sizes(), "_thnn_fused_lstm_cell_backward: expected a gradient of size ",
                  cx.sizes(), ", got ", (*grad)->sizes());
  const c10::ScalarType dtype = cx.scalar_type();
  at::Tensor gradGates = emptyDevice(workspace.sizes(), dtype);
  at::Tensor gradCx = emptyDevice(cx.sizes(), dtype);
  at::Tensor gradBias = hasBias ? emptyDevice({workspace.size(1)}, dtype) : at::Tensor();
  if (cx.numel() == 0) {
    if (gradBias.defined()) gradBias.zero_();
    return {gradGates, gradCx, gradBias};
  }
  launchKernel(streamFor(cx), kernelName("lstm_cell_bwd_fused", dtype), elementwiseShape(cx.numel()),
               [ghy = describeOptional(gradHy), gcy = describeOptional(gradCy), c = describeTensor(cx),
                c1 = describeTensor(cy), ws = describeTensor(workspace), gg = describeTensor(gradGates),
                gc = describeTensor(gradCx), gb = gradBias.defined() ? describeOptional(gradBias) : std::nullopt]() {
                 const auto gates = computeCopy(ws.view()).chunk(4, 1);
                 const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
                 const at::Tensor tanhCy = computeCopy(c1.view()).tanh();
                 const at::Tensor zeros = at::zeros_like(tanhCy);
                 const at::Tensor dHy = ghy.has_value() ? computeCopy(ghy->view()) : zeros;
                 const at::Tensor dCy = gcy.has_value() ? computeCopy(gcy->view()) : zeros;
                 const at::Tensor dC = dCy + dHy * o * (1 - tanhCy * tanhCy);
                 const at::Tensor dGates = at::cat({dC * g * i * (1 - i), dC * computeCopy(c.view()) * f * (1 - f),
                                                    dC * i * (1 - g * g), dHy * tanhCy * o * (1 - o)},
                                                   1);
                 gg.view().copy_(dGates);
                 gc.view().copy_(dC * f);
                 if (gb.has_value()) gb->view().copy_(dGates.sum(0));
               });
  return {gradGates, gradCx, gradBias};
}

std::tuple<at::Tensor, at::Tensor> fusedGruCell(const at::Tensor& inputGates, const at::Tensor& hiddenGates,
                                                const at::Tensor& hx, const std::optional<at::Tensor>& inputBias,
                                                const std::optional<at::Tensor>& hiddenBias) {
  static const c10::OperatorHandle kOp = findOp("aten::_thnn_fused_gru_cell", "");
  const c10::Device device = commonDevice(refArgs(inputGates, hiddenGates, hx, inputBias, hiddenBias), kOp);
  c10::DeviceGuard guard(device);
  checkCell("_thnn_fused_gru_cell", inputGates, hiddenGates, hx, inputBias, hiddenBias, 3);
  at::Tensor hy = emptyDevice(hx.sizes(), hx.scalar_type());
  at::Tensor workspace = emptyDevice({hx.size(0), 5 * hx.size(1)}, hx.scalar_type());
  if (hx.numel() == 0) return {hy, workspace};
  launchKernel(streamFor(hx), kernelName("gru_cell_fwd_fused", hx.scalar_type()), elementwiseShape(hx.numel()),
               [ig = describeTensor(inputGates), hg = describeTensor(hiddenGates), h = describeTensor(hx),
                ib = describeOptional(inputBias), hb = describeOptional(hiddenBias), h1 = describeTensor(hy),
                ws = describeTensor(workspace)]() {
                 at::Tensor in = computeCopy(ig.view());
                 at::Tensor hidden = computeCopy(hg.view());
                 if (ib.has_value()) in = in + computeCopy(ib->view());
                 if (hb.has_value()) hidden = hidden + computeCopy(hb->view());
                 const auto x = in.chunk(3, 1);
                 const auto hs = hidden.chunk(3, 1);
                 const at::Tensor r = (x[0] + hs[0]).sigmoid();
                 const at::Tensor z = (x[1] + hs[1]).sigmoid();
                 const at::Tensor n = (x[2] + r * hs[2]).tanh();
                 const at::Tensor hPrev = computeCopy(h.view());
                 h1.view().copy_(n + z * (hPrev - n));
                 ws.view().copy_(at::cat({r, z, n, hPrev, hs[2]}, 1));
               });
  return {hy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fusedGruCellBackward(const at::Tensor& gradHy,
                                                                                            const at::Tensor& workspace,
                                                                                            bool hasBias) {
  static const c10::OperatorHandle kOp = findOp("aten::_thnn_fused_gru_cell_backward", "");
  const c10::Device device = commonDevice(refArgs(gradHy, workspace), kOp);
  c10::DeviceGuard guard(device);
  TORCH_CHECK(gradHy.dim() == 2 && workspace.dim() == 2 && workspace.size(0) == gradHy.size(0) &&
                  workspace.size(1) == 5 * gradHy.size(1),
              "_thnn_fused_gru_cell_backward: expected a workspace of size [", gradHy.size(0), ", ", 5 * gradHy.size(1),
              "], got ", workspace.sizes());
  const c10::ScalarType dtype = gradHy.scalar_type();
  const int64_t batch = gradHy.size(0);
  const int64_t hidden = gradHy.size(1);
  at::Tensor gradInputGates = emptyDevice({batch, 3 * hidden}, dtype);
  at::Tensor gradHiddenGates = emptyDevice({batch, 3 * hidden}, dtype);
  at::Tensor gradHx = emptyDevice({batch, hidden}, dtype);
  at::Tensor gradInputBias = hasBias ? emptyDevice({3 * hidden}, dtype) : at::Tensor();
  at::Tensor gradHiddenBias = hasBias ? emptyDevice({3 * hidden}, dtype) : at::Tensor();
  if (gradHy.numel() == 0) {
    for (at::Tensor* t : {&gradInputBias, &gradHiddenBias})
      if (t->defined()) t->zero_();
    return {gradInputGates, gradHiddenGates, gradHx, gradInputBias, gradHiddenBias};
  }
  launchKernel(streamFor(gradHy), kernelName("gru_cell_bwd_fused", dtype), elementwiseShape(gradHy.numel()),
               [ghy = describeTensor(gradHy), ws = describeTensor(workspace), gi = describeTensor(gradInputGates),
                gh = describeTensor(gradHiddenGates), ghx = describeTensor(gradHx),
                gib = hasBias ? describeOptional(gradInputBias) : std::nullopt,
                ghb = hasBias ? describeOptional(gradHiddenBias) : std::nullopt]() {
                 const auto saved = computeCopy(ws.view()).chunk(5, 1);
                 const at::Tensor &r = saved[0], &z = saved[1], &n = saved[2], &hPrev = saved[3], &hn = saved[4];
                 const at::Tensor dHy = computeCopy(ghy.view());
                 const at::Tensor dN = dHy * (1 - z) * (1 - n * n);  // through tanh
                 const at::Tensor dZ = dHy * (hPrev - n) * z * (1 - z);
                 const at::Tensor dR = dN * hn * r * (1 - r);
                 const at::Tensor dInput = at::cat({dR, dZ, dN}, 1);
                 const at::Tensor dHidden = at::cat({dR, dZ, dN * r}, 1);
                 gi.view().copy_(dInput);
                 gh.view().copy_(dHidden);
                 ghx.view().copy_(dHy * z);
                 if (gib.has_value()) gib->view().copy_(dInput.sum(0));
                 if (ghb.has_value()) ghb->view().copy_(dHidden.sum(0));
               });
  return {gradInputGates, gradHiddenGates, gradHx, gradInputBias, gradHiddenBias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fusedLstmCell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fusedLstmCellBackward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fusedGruCell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fusedGruCellBackward));
  recordOpPath("aten::_thnn_fused_lstm_cell", OpPath::Device, "lstm_cell_fwd_fused");
  recordOpPath("aten::_thnn_fused_lstm_cell_backward_impl", OpPath::Device, "lstm_cell_bwd_fused");
  recordOpPath("aten::_thnn_fused_gru_cell", OpPath::Device, "gru_cell_fwd_fused");
  recordOpPath("aten::_thnn_fused_gru_cell_backward", OpPath::Device, "gru_cell_bwd_fused");
}

}  // namespace openreg::backend

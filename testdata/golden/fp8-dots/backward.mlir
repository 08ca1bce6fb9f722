// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{scaling=none}' --stats 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix STATS

// Backward dots. JAX names the ops of the backward pass with `transpose(jvp(...))`
// in their location. In a dot located there, an operand computed under
// `transpose(...)` (looking through layout ops: transpose, reshape,
// broadcast_in_dim, convert, slice, copy) is a gradient and takes the gradient
// format E5M2, clamped to +-57344; the other operand (weights, inputs, forward
// activations: block arguments and ops outside `transpose(...)`) takes the
// forward format E4M3FN, clamped to +-448. E5M2 x E5M2 has no cuBLASLt kernel,
// so when both operands are gradients the rhs takes E4M3FN.

// Over the file: 7 dots, all cast; never E5M2 x E5M2; no warning.
// STATS-NOT:  warning
// STATS:      fp8-dots.dots: 7
// STATS-NEXT: fp8-dots.f8E4M3FNxf8E4M3FN: 2
// STATS-NEXT: fp8-dots.f8E4M3FNxf8E5M2: 1
// STATS-NEXT: fp8-dots.f8E5M2xf8E4M3FN: 4
// STATS-NEXT: fp8-dots.fp8: 7
// STATS-NOT:  fp8-dots.f8E5M2xf8E5M2
// STATS-NOT:  fp8-dots.left-alone

// y = x @ w in the forward pass; dy comes from a backward op. The dgrad
// dx = dy . w^T (contracting the minor dims, "TN") takes dy as E5M2 on the lhs;
// the wgrad dw = x^T . dy takes dy as E5M2 on the rhs. Each cast is emitted
// per dot (simplify would CSE the two casts of dy).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf16>, [[W:%.*]]: tensor<16x4xf16>, [[G:%.*]]: tensor<8x4xf16>) -> (tensor<8x16xf16>, tensor<16x4xf16>)
// CHECK-NEXT:    [[HALF:%.*]] = stablehlo.constant dense<5.000000e-01> : tensor<8x4xf16>
// CHECK-NEXT:    [[DY:%.*]] = stablehlo.multiply [[G]], [[HALF]] : tensor<8x4xf16>
// dgrad
// CHECK-NEXT:    [[GLO:%.*]] = stablehlo.constant dense<-5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[GHI:%.*]] = stablehlo.constant dense<5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[GLO]], [[DY]], [[GHI]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[DY8:%.*]] = stablehlo.convert [[DYC]] : (tensor<8x4xf16>) -> tensor<8x4xf8E5M2>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO]], [[W]], [[HI]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// CHECK-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.dot_general [[DY8]], [[W8]], contracting_dims = [1] x [1] : (tensor<8x4xf8E5M2>, tensor<16x4xf8E4M3FN>) -> tensor<8x16xf32>
// CHECK-NEXT:    [[DXH:%.*]] = stablehlo.convert [[DX]] : (tensor<8x16xf32>) -> tensor<8x16xf16>
// wgrad
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO2]], [[X]], [[HI2]] : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[GLO2:%.*]] = stablehlo.constant dense<-5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[GHI2:%.*]] = stablehlo.constant dense<5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[DYC2:%.*]] = stablehlo.clamp [[GLO2]], [[DY]], [[GHI2]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[DY82:%.*]] = stablehlo.convert [[DYC2]] : (tensor<8x4xf16>) -> tensor<8x4xf8E5M2>
// CHECK-NEXT:    [[DW:%.*]] = stablehlo.dot_general [[X8]], [[DY82]], contracting_dims = [0] x [0] : (tensor<8x16xf8E4M3FN>, tensor<8x4xf8E5M2>) -> tensor<16x4xf32>
// CHECK-NEXT:    [[DWH:%.*]] = stablehlo.convert [[DW]] : (tensor<16x4xf32>) -> tensor<16x4xf16>
// CHECK-NEXT:    return [[DXH]], [[DWH]] : tensor<8x16xf16>, tensor<16x4xf16>
func.func public @main(%x: tensor<8x16xf16>, %w: tensor<16x4xf16>, %g: tensor<8x4xf16>) -> (tensor<8x16xf16>, tensor<16x4xf16>) {
  %half = stablehlo.constant dense<5.000000e-01> : tensor<8x4xf16> loc("jit(step)/transpose(jvp(loss))/mul")
  %dy = stablehlo.multiply %g, %half : tensor<8x4xf16> loc("jit(step)/transpose(jvp(loss))/mul")
  %dx = stablehlo.dot_general %dy, %w, contracting_dims = [1] x [1] : (tensor<8x4xf16>, tensor<16x4xf16>) -> tensor<8x16xf16> loc("jit(step)/transpose(jvp(loss))/dot_general")
  %dw = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] : (tensor<8x16xf16>, tensor<8x4xf16>) -> tensor<16x4xf16> loc("jit(step)/transpose(jvp(loss))/dot_general")
  return %dx, %dw : tensor<8x16xf16>, tensor<16x4xf16>
}

// -----

// The role is found through layout ops, whatever their own location: the
// gradient transposed by a forward-located transpose is still a gradient (E5M2),
// the weight transposed under `transpose(jvp(...))` is still a weight (E4M3FN).
// The casts come after those transposes; fp8-dots adds none of its own here.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[W:%.*]]: tensor<16x4xf16>, [[G:%.*]]: tensor<4x8xf16>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[DY:%.*]] = stablehlo.negate [[G]] : tensor<4x8xf16>
// CHECK-NEXT:    [[DYT:%.*]] = stablehlo.transpose [[DY]], dims = [1, 0] : (tensor<4x8xf16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[WT:%.*]] = stablehlo.transpose [[W]], dims = [1, 0] : (tensor<16x4xf16>) -> tensor<4x16xf16>
// CHECK-NEXT:    [[GLO:%.*]] = stablehlo.constant dense<-5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[GHI:%.*]] = stablehlo.constant dense<5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[GLO]], [[DYT]], [[GHI]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[DY8:%.*]] = stablehlo.convert [[DYC]] : (tensor<8x4xf16>) -> tensor<8x4xf8E5M2>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO]], [[WT]], [[HI]] : (tensor<f16>, tensor<4x16xf16>, tensor<f16>) -> tensor<4x16xf16>
// CHECK-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<4x16xf16>) -> tensor<4x16xf8E4M3FN>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.dot_general [[DY8]], [[W8]], contracting_dims = [1] x [0] : (tensor<8x4xf8E5M2>, tensor<4x16xf8E4M3FN>) -> tensor<8x16xf32>
// CHECK-NEXT:    [[DXH:%.*]] = stablehlo.convert [[DX]] : (tensor<8x16xf32>) -> tensor<8x16xf16>
// CHECK-NEXT:    return [[DXH]] : tensor<8x16xf16>
func.func public @main(%w: tensor<16x4xf16>, %g: tensor<4x8xf16>) -> tensor<8x16xf16> {
  %dy = stablehlo.negate %g : tensor<4x8xf16> loc("jit(step)/transpose(jvp(loss))/neg")
  %dyt = stablehlo.transpose %dy, dims = [1, 0] : (tensor<4x8xf16>) -> tensor<8x4xf16> loc("jit(step)/jvp(loss)/transpose")
  %wt = stablehlo.transpose %w, dims = [1, 0] : (tensor<16x4xf16>) -> tensor<4x16xf16> loc("jit(step)/transpose(jvp(loss))/transpose")
  %dx = stablehlo.dot_general %dyt, %wt, contracting_dims = [1] x [0] : (tensor<8x4xf16>, tensor<4x16xf16>) -> tensor<8x16xf16> loc("jit(step)/transpose(jvp(loss))/dot_general")
  return %dx : tensor<8x16xf16>
}

// -----

// Both operands are gradients: never E5M2 x E5M2 (no cuBLASLt kernel). The lhs
// keeps E5M2, the rhs falls back to E4M3FN.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[A:%.*]]: tensor<8x16xf16>, [[B:%.*]]: tensor<8x4xf16>) -> tensor<16x4xf16>
// CHECK-NEXT:    [[DA:%.*]] = stablehlo.negate [[A]] : tensor<8x16xf16>
// CHECK-NEXT:    [[DB:%.*]] = stablehlo.negate [[B]] : tensor<8x4xf16>
// CHECK-NEXT:    [[GLO:%.*]] = stablehlo.constant dense<-5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[GHI:%.*]] = stablehlo.constant dense<5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[DAC:%.*]] = stablehlo.clamp [[GLO]], [[DA]], [[GHI]] : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[DA8:%.*]] = stablehlo.convert [[DAC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E5M2>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[DBC:%.*]] = stablehlo.clamp [[LO]], [[DB]], [[HI]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[DB8:%.*]] = stablehlo.convert [[DBC]] : (tensor<8x4xf16>) -> tensor<8x4xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[DA8]], [[DB8]], contracting_dims = [0] x [0] : (tensor<8x16xf8E5M2>, tensor<8x4xf8E4M3FN>) -> tensor<16x4xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[D]] : (tensor<16x4xf32>) -> tensor<16x4xf16>
// CHECK-NEXT:    return [[Y]] : tensor<16x4xf16>
// CHECK-NOT:     f8E5M2>, tensor<{{.*}}f8E5M2>
func.func public @main(%a: tensor<8x16xf16>, %b: tensor<8x4xf16>) -> tensor<16x4xf16> {
  %da = stablehlo.negate %a : tensor<8x16xf16> loc("jit(step)/transpose(jvp(loss))/neg")
  %db = stablehlo.negate %b : tensor<8x4xf16> loc("jit(step)/transpose(jvp(loss))/neg")
  %0 = stablehlo.dot_general %da, %db, contracting_dims = [0] x [0] : (tensor<8x16xf16>, tensor<8x4xf16>) -> tensor<16x4xf16> loc("jit(step)/transpose(jvp(loss))/dot_general")
  return %0 : tensor<16x4xf16>
}

// -----

// A dot under `transpose(...)` whose operands are both forward values (block
// arguments, a forward activation) is E4M3FN x E4M3FN; a dot outside the
// backward pass (the optimizer, say) takes the forward format even for a
// gradient operand: the gradient format is chosen only inside backward dots.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf16>, [[W:%.*]]: tensor<16x4xf16>, [[G:%.*]]: tensor<8x4xf16>) -> (tensor<8x4xf16>, tensor<16x4xf16>)
// CHECK-NEXT:    [[H:%.*]] = stablehlo.negate [[X]] : tensor<8x16xf16>
// CHECK-NEXT:    [[DY:%.*]] = stablehlo.negate [[G]] : tensor<8x4xf16>
// CHECK-COUNT-2: stablehlo.constant dense<{{-?}}4.480000e+02> : tensor<f16>
// CHECK-NEXT:    stablehlo.clamp {{.*}} -> tensor<8x16xf16>
// CHECK-NEXT:    stablehlo.convert {{.*}} -> tensor<8x16xf8E4M3FN>
// CHECK-COUNT-2: stablehlo.constant dense<{{-?}}4.480000e+02> : tensor<f16>
// CHECK-NEXT:    stablehlo.clamp {{.*}} -> tensor<16x4xf16>
// CHECK-NEXT:    stablehlo.convert {{.*}} -> tensor<16x4xf8E4M3FN>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-NEXT:    stablehlo.convert [[Y]] : (tensor<8x4xf32>) -> tensor<8x4xf16>
// CHECK-COUNT-2: stablehlo.constant dense<{{-?}}4.480000e+02> : tensor<f16>
// CHECK-NEXT:    stablehlo.clamp {{.*}} -> tensor<8x16xf16>
// CHECK-NEXT:    stablehlo.convert {{.*}} -> tensor<8x16xf8E4M3FN>
// CHECK-COUNT-2: stablehlo.constant dense<{{-?}}4.480000e+02> : tensor<f16>
// CHECK-NEXT:    stablehlo.clamp {{.*}}, [[DY]], {{.*}} -> tensor<8x4xf16>
// CHECK-NEXT:    stablehlo.convert {{.*}} -> tensor<8x4xf8E4M3FN>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<8x4xf8E4M3FN>) -> tensor<16x4xf32>
// CHECK-NEXT:    stablehlo.convert [[U]] : (tensor<16x4xf32>) -> tensor<16x4xf16>
// CHECK-NEXT:    return
func.func public @main(%x: tensor<8x16xf16>, %w: tensor<16x4xf16>, %g: tensor<8x4xf16>) -> (tensor<8x4xf16>, tensor<16x4xf16>) {
  %h = stablehlo.negate %x : tensor<8x16xf16> loc("jit(step)/jvp(loss)/neg")
  %dy = stablehlo.negate %g : tensor<8x4xf16> loc("jit(step)/transpose(jvp(loss))/neg")
  %y = stablehlo.dot_general %h, %w, contracting_dims = [1] x [0] : (tensor<8x16xf16>, tensor<16x4xf16>) -> tensor<8x4xf16> loc("jit(step)/transpose(jvp(loss))/dot_general")
  %u = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] : (tensor<8x16xf16>, tensor<8x4xf16>) -> tensor<16x4xf16> loc("jit(step)/dot_general")
  return %y, %u : tensor<8x4xf16>, tensor<16x4xf16>
}

// -----

// Inlined ops carry `callsite(callee at caller)` locations: the whole location
// is searched, so a backward dot inside an inlined private function is found.

// CHECK-LABEL: func.func public @main
// CHECK:         stablehlo.dot_general {{.*}} : (tensor<8x4xf8E5M2>, tensor<16x4xf8E4M3FN>) -> tensor<8x16xf32>
func.func public @main(%w: tensor<16x4xf16>, %g: tensor<8x4xf16>) -> tensor<8x16xf16> {
  %dy = stablehlo.negate %g : tensor<8x4xf16> loc(callsite("jit(step)/transpose(jvp(loss))/neg"("model.py":3:5) at "jit(step)/transpose(jvp(loss))/pjit"("model.py":9:1)))
  %dx = stablehlo.dot_general %dy, %w, contracting_dims = [1] x [1] : (tensor<8x4xf16>, tensor<16x4xf16>) -> tensor<8x16xf16> loc(callsite("dot_general"("model.py":4:5) at "jit(step)/transpose(jvp(loss))/pjit"("model.py":9:1)))
  return %dx : tensor<8x16xf16>
}

// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{gradient-format=f8E4M3FN scaling=none}' \
// RUN:   | filecheck %s --check-prefix G43
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{forward-format=f8E5M2 scaling=none}' \
// RUN:   | filecheck %s --check-prefix F52
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'fp8-dots{forward-format=f8E5M2 gradient-format=f8E4M3FN scaling=none}' \
// RUN:   | filecheck %s --check-prefix SWAP
// RUN: not scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{forward-format=f8E4M3}' 2>&1 \
// RUN:   | filecheck %s --check-prefix BADFWD
// RUN: not scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{gradient-format=bf16}' 2>&1 \
// RUN:   | filecheck %s --check-prefix BADGRAD
// RUN: not scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{min-size=big}' 2>&1 \
// RUN:   | filecheck %s --check-prefix BADSIZE
// RUN: not scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{exclude=[}' 2>&1 \
// RUN:   | filecheck %s --check-prefix BADRE
// RUN: not scalify-hlo rewrite %s --split-input-file --pipeline 'fp8-dots{format=f8E5M2}' 2>&1 \
// RUN:   | filecheck %s --check-prefix BADOPT

// The formats are options: forward-format (activations and weights, default
// f8E4M3FN) and gradient-format (default f8E5M2). The clamp bound follows the
// format: +-448 for E4M3FN, +-57344 for E5M2. Whatever the options, a dot never
// takes E5M2 x E5M2 (no cuBLASLt kernel): the rhs falls back to E4M3FN.

// BADFWD:  error: invalid value 'f8E4M3' for option 'forward-format' of pass 'fp8-dots': expected one of f8E4M3FN, f8E5M2
// BADGRAD: error: invalid value 'bf16' for option 'gradient-format' of pass 'fp8-dots': expected one of f8E4M3FN, f8E5M2
// BADSIZE: error: invalid value 'big' for option 'min-size' of pass 'fp8-dots': expected an integer
// BADRE:   error: invalid exclude pattern '[': unterminated character set at position 0
// BADOPT:  error: unknown option 'format' for pass 'fp8-dots' (options: forward-format, gradient-format, min-size, exclude, scaling, delayed-statistics, output-head, head-operands, batched)

// A dgrad, dx = dy . w^T, with dy computed in the backward pass.

// gradient-format=f8E4M3FN: everything is E4M3FN, clamped to +-448.
// G43-LABEL: func.func public @main
// G43-SAME:    ([[W:%.*]]: tensor<16x4xf16>, [[G:%.*]]: tensor<8x4xf16>) -> tensor<8x16xf16>
// G43-NEXT:    [[DY:%.*]] = stablehlo.negate [[G]] : tensor<8x4xf16>
// G43-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// G43-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// G43-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[LO]], [[DY]], [[HI]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// G43-NEXT:    [[DY8:%.*]] = stablehlo.convert [[DYC]] : (tensor<8x4xf16>) -> tensor<8x4xf8E4M3FN>
// G43-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// G43-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// G43-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO2]], [[W]], [[HI2]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// G43-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// G43-NEXT:    [[DX:%.*]] = stablehlo.dot_general [[DY8]], [[W8]], contracting_dims = [1] x [1] : (tensor<8x4xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x16xf32>
// G43-NEXT:    [[Y:%.*]] = stablehlo.convert [[DX]] : (tensor<8x16xf32>) -> tensor<8x16xf16>
// G43-NEXT:    return [[Y]] : tensor<8x16xf16>

// forward-format=f8E5M2: the gradient is E5M2 and so would be the weight;
// E5M2 x E5M2 is avoided by casting the rhs to E4M3FN.
// F52-LABEL: func.func public @main
// F52-SAME:    ([[W:%.*]]: tensor<16x4xf16>, [[G:%.*]]: tensor<8x4xf16>) -> tensor<8x16xf16>
// F52-NEXT:    [[DY:%.*]] = stablehlo.negate [[G]] : tensor<8x4xf16>
// F52-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-5.734400e+04> : tensor<f16>
// F52-NEXT:    [[HI:%.*]] = stablehlo.constant dense<5.734400e+04> : tensor<f16>
// F52-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[LO]], [[DY]], [[HI]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// F52-NEXT:    [[DY8:%.*]] = stablehlo.convert [[DYC]] : (tensor<8x4xf16>) -> tensor<8x4xf8E5M2>
// F52-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// F52-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// F52-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO2]], [[W]], [[HI2]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// F52-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// F52-NEXT:    [[DX:%.*]] = stablehlo.dot_general [[DY8]], [[W8]], contracting_dims = [1] x [1] : (tensor<8x4xf8E5M2>, tensor<16x4xf8E4M3FN>) -> tensor<8x16xf32>
// F52-NEXT:    [[Y:%.*]] = stablehlo.convert [[DX]] : (tensor<8x16xf32>) -> tensor<8x16xf16>
// F52-NEXT:    return [[Y]] : tensor<8x16xf16>

// Both formats swapped: the gradient is E4M3FN (+-448), the weight E5M2 (+-57344).
// SWAP-LABEL: func.func public @main
// SWAP-SAME:    ([[W:%.*]]: tensor<16x4xf16>, [[G:%.*]]: tensor<8x4xf16>) -> tensor<8x16xf16>
// SWAP-NEXT:    [[DY:%.*]] = stablehlo.negate [[G]] : tensor<8x4xf16>
// SWAP-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// SWAP-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// SWAP-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[LO]], [[DY]], [[HI]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// SWAP-NEXT:    [[DY8:%.*]] = stablehlo.convert [[DYC]] : (tensor<8x4xf16>) -> tensor<8x4xf8E4M3FN>
// SWAP-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-5.734400e+04> : tensor<f16>
// SWAP-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<5.734400e+04> : tensor<f16>
// SWAP-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO2]], [[W]], [[HI2]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// SWAP-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E5M2>
// SWAP-NEXT:    [[DX:%.*]] = stablehlo.dot_general [[DY8]], [[W8]], contracting_dims = [1] x [1] : (tensor<8x4xf8E4M3FN>, tensor<16x4xf8E5M2>) -> tensor<8x16xf32>
// SWAP-NEXT:    [[Y:%.*]] = stablehlo.convert [[DX]] : (tensor<8x16xf32>) -> tensor<8x16xf16>
// SWAP-NEXT:    return [[Y]] : tensor<8x16xf16>
func.func public @main(%w: tensor<16x4xf16>, %g: tensor<8x4xf16>) -> tensor<8x16xf16> {
  %dy = stablehlo.negate %g : tensor<8x4xf16> loc("jit(step)/transpose(jvp(loss))/neg")
  %dx = stablehlo.dot_general %dy, %w, contracting_dims = [1] x [1] : (tensor<8x4xf16>, tensor<16x4xf16>) -> tensor<8x16xf16> loc("jit(step)/transpose(jvp(loss))/dot_general")
  return %dx : tensor<8x16xf16>
}

// -----

// Both operands gradients (see backward.mlir): only the lhs takes the gradient
// format, the rhs the forward format, and never E5M2 x E5M2. With
// gradient-format=f8E4M3FN both are E4M3FN; with forward-format=f8E5M2 the rhs
// would be E5M2 too and falls back to E4M3FN. (With the formats swapped the rhs
// gradient takes the forward format E5M2; only the absence of E5M2 x E5M2 is
// pinned for that case.)

// G43-LABEL: func.func public @main
// G43-SAME:    -> tensor<16x4xf16>
// G43:         stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<8x4xf8E4M3FN>) -> tensor<16x4xf32>

// F52-LABEL: func.func public @main
// F52-SAME:    -> tensor<16x4xf16>
// F52:         stablehlo.dot_general {{.*}} : (tensor<8x16xf8E5M2>, tensor<8x4xf8E4M3FN>) -> tensor<16x4xf32>

// SWAP-LABEL: func.func public @main
// SWAP-SAME:    -> tensor<16x4xf16>
// SWAP-NOT:     xf8E5M2>, tensor<{{[0-9x]+}}xf8E5M2>
// SWAP:         stablehlo.dot_general {{.*}} : (tensor<8x16xf8E4M3FN>, tensor<8x4xf8{{E4M3FN|E5M2}}>) -> tensor<16x4xf32>
// SWAP-NOT:     xf8E5M2>, tensor<{{[0-9x]+}}xf8E5M2>
func.func public @main(%a: tensor<8x16xf16>, %b: tensor<8x4xf16>) -> tensor<16x4xf16> {
  %da = stablehlo.negate %a : tensor<8x16xf16> loc("jit(step)/transpose(jvp(loss))/neg")
  %db = stablehlo.negate %b : tensor<8x4xf16> loc("jit(step)/transpose(jvp(loss))/neg")
  %0 = stablehlo.dot_general %da, %db, contracting_dims = [0] x [0] : (tensor<8x16xf16>, tensor<8x4xf16>) -> tensor<16x4xf16> loc("jit(step)/transpose(jvp(loss))/dot_general")
  return %0 : tensor<16x4xf16>
}

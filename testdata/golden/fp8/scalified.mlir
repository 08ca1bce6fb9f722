// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16},fp8-dots' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f16},fp8-dots,simplify' | filecheck %s --check-prefix SIMP

// fp8-dots after scalify, as in the default pipeline: the f32 module becomes
// (f16 data, f32 scale) pairs and fp8-dots casts the f16 data operands of each
// dot. Scales never enter the dot: the unit-scaling factor of the dot rule
// (data * 2^-k, scale a_s * b_s * 2^k, 2^k nearest sqrt(K)) multiplies the f32
// GEMM result before the convert to f16 (where XLA folds it into the GEMM).

// A forward dot, K = 16: data * 2^-2, scale x_s * w_s * 4.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf16>, [[XS:%.*]]: tensor<f32>, [[W:%.*]]: tensor<16x4xf16>, [[WS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<8x4xf16>, tensor<f32>)
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO]], [[X]], [[HI]] : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO2]], [[W]], [[HI2]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// CHECK-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.dot_general [[X8]], [[W8]], contracting_dims = [1] x [0] : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[Q:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<8x4xf32>
// CHECK-NEXT:    [[DQ:%.*]] = stablehlo.multiply [[D]], [[Q]] : tensor<8x4xf32>
// CHECK-NEXT:    [[Y:%.*]] = stablehlo.convert [[DQ]] : (tensor<8x4xf32>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[P:%.*]] = stablehlo.multiply [[XS]], [[WS]] : tensor<f32>
// CHECK-NEXT:    [[FOUR:%.*]] = stablehlo.constant dense<4.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.multiply [[P]], [[FOUR]] : tensor<f32>
// CHECK-NEXT:    return [[Y]], [[S]] : tensor<8x4xf16>, tensor<f32>
// simplify CSEs the clamp bounds: one pair of constants serves both operands.
// SIMP-LABEL: func.func public @main
// SIMP-SAME:    -> (tensor<8x4xf16>, tensor<f32>)
// SIMP:         [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// SIMP-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// SIMP-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO]], %arg0, [[HI]] : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
// SIMP-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// SIMP-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO]], %arg2, [[HI]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// SIMP-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// SIMP-NEXT:    stablehlo.dot_general [[X8]], [[W8]], contracting_dims = [1] x [0] : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
func.func public @main(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<8x4xf32>
}

// -----

// dgrad (K = 4: data * 2^-1) and wgrad (K = 8: data * 2^-2) of a backward
// pass: scalify keeps the locations, so dy's data (the negate under
// `transpose(jvp(...))`) is still recognized as a gradient and cast to E5M2.
// Without simplify each dot casts dy on its own; simplify CSEs the two casts
// into one E5M2 value shared by both dots, and hoists the constants.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<8x16xf16>, [[XS:%.*]]: tensor<f32>, [[W:%.*]]: tensor<16x4xf16>, [[WS:%.*]]: tensor<f32>, [[G:%.*]]: tensor<8x4xf16>, [[GS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<8x16xf16>, tensor<f32>, tensor<16x4xf16>, tensor<f32>)
// CHECK-NEXT:    [[DY:%.*]] = stablehlo.negate [[G]] : tensor<8x4xf16>
// CHECK-NEXT:    [[GLO:%.*]] = stablehlo.constant dense<-5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[GHI:%.*]] = stablehlo.constant dense<5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[GLO]], [[DY]], [[GHI]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[DY8:%.*]] = stablehlo.convert [[DYC]] : (tensor<8x4xf16>) -> tensor<8x4xf8E5M2>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO]], [[W]], [[HI]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// CHECK-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.dot_general [[DY8]], [[W8]], contracting_dims = [1] x [1] : (tensor<8x4xf8E5M2>, tensor<16x4xf8E4M3FN>) -> tensor<8x16xf32>
// CHECK-NEXT:    [[HALF:%.*]] = stablehlo.constant dense<5.000000e-01> : tensor<8x16xf32>
// CHECK-NEXT:    [[DXQ:%.*]] = stablehlo.multiply [[DX]], [[HALF]] : tensor<8x16xf32>
// CHECK-NEXT:    [[DXD:%.*]] = stablehlo.convert [[DXQ]] : (tensor<8x16xf32>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[LO2:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[HI2:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// CHECK-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO2]], [[X]], [[HI2]] : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// CHECK-NEXT:    [[GLO2:%.*]] = stablehlo.constant dense<-5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[GHI2:%.*]] = stablehlo.constant dense<5.734400e+04> : tensor<f16>
// CHECK-NEXT:    [[DYC2:%.*]] = stablehlo.clamp [[GLO2]], [[DY]], [[GHI2]] : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[DY82:%.*]] = stablehlo.convert [[DYC2]] : (tensor<8x4xf16>) -> tensor<8x4xf8E5M2>
// CHECK-NEXT:    [[DW:%.*]] = stablehlo.dot_general [[X8]], [[DY82]], contracting_dims = [0] x [0] : (tensor<8x16xf8E4M3FN>, tensor<8x4xf8E5M2>) -> tensor<16x4xf32>
// CHECK-NEXT:    [[QUARTER:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<16x4xf32>
// CHECK-NEXT:    [[DWQ:%.*]] = stablehlo.multiply [[DW]], [[QUARTER]] : tensor<16x4xf32>
// CHECK-NEXT:    [[DWD:%.*]] = stablehlo.convert [[DWQ]] : (tensor<16x4xf32>) -> tensor<16x4xf16>
// CHECK-NEXT:    [[P1:%.*]] = stablehlo.multiply [[WS]], [[GS]] : tensor<f32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[DXS:%.*]] = stablehlo.multiply [[P1]], [[TWO]] : tensor<f32>
// CHECK-NEXT:    [[P2:%.*]] = stablehlo.multiply [[XS]], [[GS]] : tensor<f32>
// CHECK-NEXT:    [[FOUR:%.*]] = stablehlo.constant dense<4.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[DWS:%.*]] = stablehlo.multiply [[P2]], [[FOUR]] : tensor<f32>
// CHECK-NEXT:    return [[DXD]], [[DXS]], [[DWD]], [[DWS]] : tensor<8x16xf16>, tensor<f32>, tensor<16x4xf16>, tensor<f32>

// SIMP-LABEL: func.func public @main
// SIMP-SAME:    -> (tensor<8x16xf16>, tensor<f32>, tensor<16x4xf16>, tensor<f32>)
// SIMP:         [[DY:%.*]] = stablehlo.negate %arg4 : tensor<8x4xf16>
// SIMP-NEXT:    [[DYC:%.*]] = stablehlo.clamp {{.*}}, [[DY]], {{.*}} : (tensor<f16>, tensor<8x4xf16>, tensor<f16>) -> tensor<8x4xf16>
// SIMP-NEXT:    [[DY8:%.*]] = stablehlo.convert [[DYC]] : (tensor<8x4xf16>) -> tensor<8x4xf8E5M2>
// SIMP:         stablehlo.dot_general [[DY8]], {{.*}} : (tensor<8x4xf8E5M2>, tensor<16x4xf8E4M3FN>) -> tensor<8x16xf32>
// SIMP:         stablehlo.dot_general {{.*}}, [[DY8]], contracting_dims = [0] x [0] : (tensor<8x16xf8E4M3FN>, tensor<8x4xf8E5M2>) -> tensor<16x4xf32>
// SIMP-NOT:     f8E5M2
// SIMP:         return
func.func public @main(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %g: tensor<8x4xf32>) -> (tensor<8x16xf32>, tensor<16x4xf32>) {
  %dy = stablehlo.negate %g : tensor<8x4xf32> loc("jit(step)/transpose(jvp(loss))/neg")
  %dx = stablehlo.dot_general %dy, %w, contracting_dims = [1] x [1] : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32> loc("jit(step)/transpose(jvp(loss))/dot_general")
  %dw = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32> loc("jit(step)/transpose(jvp(loss))/dot_general")
  return %dx, %dw : tensor<8x16xf32>, tensor<16x4xf32>
}

// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16},fp8-dots{scaling=none}' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f16},fp8-dots{scaling=none},simplify{pack-scales=none}' | filecheck %s --check-prefix SIMP

// fp8-dots after scalify, as in the default pipeline: the f32 module becomes
// (f16 data, f32 scale) pairs and fp8-dots casts the f16 data operands of each
// dot. Scales never enter the dot: the unit-scaling factor of the dot rule
// (data * 2^-k, exponent e_a + e_b + k, 2^k nearest sqrt(K)) multiplies the f32
// GEMM result before the convert to f16 (where XLA folds it into the GEMM).
// The i32 exponents of the scale arguments, e = (bits(s) >> 23) - 127, are
// added; at the result the f32 scale is 2^clamp(e, -126, 127) and the f16
// data is multiplied, in f32, by the excess 2^clamp(e - clamp(e, -126, 127),
// -127, 127), each factor built from bits, bitcast((k + 127) << 23).

// A forward dot, K = 16: data * 2^-2, exponent e_x + e_w + 2.

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
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[WS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[EW:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[P:%.*]] = stablehlo.add [[EX]], [[EW]] : tensor<i32>
// CHECK-NEXT:    [[K:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.add [[P]], [[K]] : tensor<i32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[EH:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[EXC:%.*]] = stablehlo.subtract [[E]], [[EH]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KL:%.*]] = stablehlo.clamp [[CM127]], [[EXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLB:%.*]] = stablehlo.add [[KL]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLS:%.*]] = stablehlo.shift_left [[KLB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FL:%.*]] = stablehlo.bitcast_convert [[KLS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[YW:%.*]] = stablehlo.convert [[Y]] : (tensor<8x4xf16>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[FLB:%.*]] = stablehlo.broadcast_in_dim [[FL]], dims = [] : (tensor<f32>) -> tensor<8x4xf32>
// CHECK-NEXT:    [[YL:%.*]] = stablehlo.multiply [[YW]], [[FLB]] : tensor<8x4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.convert [[YL]] : (tensor<8x4xf32>) -> tensor<8x4xf16>
// CHECK-NEXT:    [[KSB:%.*]] = stablehlo.add [[EH]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KSS:%.*]] = stablehlo.shift_left [[KSB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.bitcast_convert [[KSS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<8x4xf16>, tensor<f32>

// simplify CSEs the clamp bounds: one pair of constants serves both operands.
// It also hoists and CSEs the i32 constants, so the one clamp of e to
// [-126, 127] serves both the excess and the returned scale.
// SIMP-LABEL: func.func public @main
// SIMP-SAME:    -> (tensor<8x4xf16>, tensor<f32>)
// SIMP:         [[LO:%.*]] = stablehlo.constant dense<-4.480000e+02> : tensor<f16>
// SIMP-NEXT:    [[HI:%.*]] = stablehlo.constant dense<4.480000e+02> : tensor<f16>
// SIMP-NEXT:    [[XC:%.*]] = stablehlo.clamp [[LO]], %arg0, [[HI]] : (tensor<f16>, tensor<8x16xf16>, tensor<f16>) -> tensor<8x16xf16>
// SIMP-NEXT:    [[X8:%.*]] = stablehlo.convert [[XC]] : (tensor<8x16xf16>) -> tensor<8x16xf8E4M3FN>
// SIMP-NEXT:    [[WC:%.*]] = stablehlo.clamp [[LO]], %arg2, [[HI]] : (tensor<f16>, tensor<16x4xf16>, tensor<f16>) -> tensor<16x4xf16>
// SIMP-NEXT:    [[W8:%.*]] = stablehlo.convert [[WC]] : (tensor<16x4xf16>) -> tensor<16x4xf8E4M3FN>
// SIMP-NEXT:    stablehlo.dot_general [[X8]], [[W8]], contracting_dims = [1] x [0] : (tensor<8x16xf8E4M3FN>, tensor<16x4xf8E4M3FN>) -> tensor<8x4xf32>
// SIMP:         [[P:%.*]] = stablehlo.add {{%.*}}, {{%.*}} : tensor<i32>
// SIMP-NEXT:    [[E:%.*]] = stablehlo.add [[P]], {{%.*}} : tensor<i32>
// SIMP-NEXT:    [[EH:%.*]] = stablehlo.clamp {{%.*}}, [[E]], [[C127:%.*]] : tensor<i32>
// SIMP-NEXT:    [[EXC:%.*]] = stablehlo.subtract [[E]], [[EH]] : tensor<i32>
// SIMP:         [[SB:%.*]] = stablehlo.add [[EH]], [[C127]] : tensor<i32>
// SIMP-NEXT:    [[SS:%.*]] = stablehlo.shift_left [[SB]], {{%.*}} : tensor<i32>
// SIMP-NEXT:    [[S:%.*]] = stablehlo.bitcast_convert [[SS]] : (tensor<i32>) -> tensor<f32>
// SIMP-NEXT:    return {{%.*}}, [[S]] : tensor<8x4xf16>, tensor<f32>
func.func public @main(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32> loc("jit(step)/jvp(loss)/dot_general")
  return %0 : tensor<8x4xf32>
}

// -----

// dgrad (K = 4: data * 2^-1, exponent e_w + e_g + 1) and wgrad (K = 8:
// data * 2^-2, exponent e_x + e_g + 2) of a backward pass: scalify keeps the
// locations, so dy's data (the negate under `transpose(jvp(...))`) is still
// recognized as a gradient and cast to E5M2. Without simplify each dot casts
// dy on its own; simplify CSEs the two casts into one E5M2 value shared by
// both dots, and hoists the constants.

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
// CHECK:         stablehlo.bitcast_convert [[WS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[EW:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[GS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[EG:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[P1:%.*]] = stablehlo.add [[EW]], [[EG]] : tensor<i32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[EDX:%.*]] = stablehlo.add [[P1]], [[ONE]] : tensor<i32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[EH1:%.*]] = stablehlo.clamp [[CM126]], [[EDX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[EXC1:%.*]] = stablehlo.subtract [[EDX]], [[EH1]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KL1:%.*]] = stablehlo.clamp [[CM127]], [[EXC1]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLB1:%.*]] = stablehlo.add [[KL1]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLS1:%.*]] = stablehlo.shift_left [[KLB1]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FL1:%.*]] = stablehlo.bitcast_convert [[KLS1]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DXW:%.*]] = stablehlo.convert [[DXD]] : (tensor<8x16xf16>) -> tensor<8x16xf32>
// CHECK-NEXT:    [[FLB1:%.*]] = stablehlo.broadcast_in_dim [[FL1]], dims = [] : (tensor<f32>) -> tensor<8x16xf32>
// CHECK-NEXT:    [[DXL:%.*]] = stablehlo.multiply [[DXW]], [[FLB1]] : tensor<8x16xf32>
// CHECK-NEXT:    [[RDX:%.*]] = stablehlo.convert [[DXL]] : (tensor<8x16xf32>) -> tensor<8x16xf16>
// CHECK-NEXT:    [[KSB1:%.*]] = stablehlo.add [[EH1]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KSS1:%.*]] = stablehlo.shift_left [[KSB1]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[SDX:%.*]] = stablehlo.bitcast_convert [[KSS1]] : (tensor<i32>) -> tensor<f32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[P2:%.*]] = stablehlo.add [[EX]], [[EG]] : tensor<i32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:    [[EDW:%.*]] = stablehlo.add [[P2]], [[TWO]] : tensor<i32>
// CHECK-NEXT:    [[EH2:%.*]] = stablehlo.clamp [[CM126]], [[EDW]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[EXC2:%.*]] = stablehlo.subtract [[EDW]], [[EH2]] : tensor<i32>
// CHECK-NEXT:    [[KL2:%.*]] = stablehlo.clamp [[CM127]], [[EXC2]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLB2:%.*]] = stablehlo.add [[KL2]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLS2:%.*]] = stablehlo.shift_left [[KLB2]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FL2:%.*]] = stablehlo.bitcast_convert [[KLS2]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DWW:%.*]] = stablehlo.convert [[DWD]] : (tensor<16x4xf16>) -> tensor<16x4xf32>
// CHECK-NEXT:    [[FLB2:%.*]] = stablehlo.broadcast_in_dim [[FL2]], dims = [] : (tensor<f32>) -> tensor<16x4xf32>
// CHECK-NEXT:    [[DWL:%.*]] = stablehlo.multiply [[DWW]], [[FLB2]] : tensor<16x4xf32>
// CHECK-NEXT:    [[RDW:%.*]] = stablehlo.convert [[DWL]] : (tensor<16x4xf32>) -> tensor<16x4xf16>
// CHECK-NEXT:    [[KSB2:%.*]] = stablehlo.add [[EH2]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KSS2:%.*]] = stablehlo.shift_left [[KSB2]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[SDW:%.*]] = stablehlo.bitcast_convert [[KSS2]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[RDX]], [[SDX]], [[RDW]], [[SDW]] : tensor<8x16xf16>, tensor<f32>, tensor<16x4xf16>, tensor<f32>

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

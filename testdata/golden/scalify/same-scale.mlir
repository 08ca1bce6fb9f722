// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 common-scale=max}' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f32 common-scale=first}' | filecheck %s --check-prefix FIRST
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f16}' \
// RUN:   | filecheck %s --check-prefix F16

// Same-scale family: the op runs on the data, float operands first brought to
// one common power-of-two scale (each data multiplied by 2^(e - E), e its i32
// exponent and E the common one), and the result carries that scale. The
// FIRST prefix checks every case but the last (the option changes the first
// and the select case only); the F16 prefix checks the first two and the last.
//
// With common-scale=max (auto for f16 data), ops that merge operands without
// arithmetic (maximum and select here) take the midpoint E = (e1 + e2) >> 1 of
// the exponents for f32 and bf16 data, and the maximum for f16 data.

// Two operands with different runtime scales, f32 data: the argument scales
// become i32 exponents (bits >> 23, minus 127), the common exponent is their
// midpoint (shift_right_arithmetic by 1), and both data are multiplied by a
// factor 2^clamp(e - E, -127, 127) built from bits (one >= 1, one <= 1). At the
// return, the f32 scale is 2^clamp(E, -126, 127) and the data takes the excess
// 2^clamp(E - that, -127, 127).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[XB:%.*]] = stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK-NEXT:    [[XSH:%.*]] = stablehlo.shift_right_logical [[XB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK-NEXT:    [[XE:%.*]] = stablehlo.subtract [[XSH]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[YB:%.*]] = stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[YSH:%.*]] = stablehlo.shift_right_logical [[YB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[YE:%.*]] = stablehlo.subtract [[YSH]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[ESUM:%.*]] = stablehlo.add [[XE]], [[YE]] : tensor<i32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.shift_right_arithmetic [[ESUM]], [[C1]] : tensor<i32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[XE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[DXC:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXB:%.*]] = stablehlo.add [[DXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXI:%.*]] = stablehlo.shift_left [[DXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DXF:%.*]] = stablehlo.bitcast_convert [[DXI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DXFB:%.*]] = stablehlo.broadcast_in_dim [[DXF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[DXFB]] : tensor<4xf32>
// CHECK-NEXT:    [[DY:%.*]] = stablehlo.subtract [[YE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[CM127]], [[DY]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DYB:%.*]] = stablehlo.add [[DYC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DYI:%.*]] = stablehlo.shift_left [[DYB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DYF:%.*]] = stablehlo.bitcast_convert [[DYI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DYFB:%.*]] = stablehlo.broadcast_in_dim [[DYF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[DYFB]] : tensor<4xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.maximum [[X1]], [[Y1]] : tensor<4xf32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.subtract [[E]], [[HI]] : tensor<i32>
// CHECK-NEXT:    [[LOC:%.*]] = stablehlo.clamp [[CM127]], [[LO]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOB:%.*]] = stablehlo.add [[LOC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOI:%.*]] = stablehlo.shift_left [[LOB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[LOF:%.*]] = stablehlo.bitcast_convert [[LOI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[LOFB:%.*]] = stablehlo.broadcast_in_dim [[LOF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[MD:%.*]] = stablehlo.multiply [[M]], [[LOFB]] : tensor<4xf32>
// CHECK-NEXT:    [[HIB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[HII:%.*]] = stablehlo.shift_left [[HIB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[MS:%.*]] = stablehlo.bitcast_convert [[HII]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[MD]], [[MS]] : tensor<4xf32>, tensor<f32>

// common-scale=first keeps the first operand's scale: only the second data is
// multiplied, by 2^(y_e - x_e), and the result's scale is x_s itself (no
// factor at the return).

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// FIRST-SAME:    -> (tensor<4xf32>, tensor<f32>)
// FIRST-NEXT:    [[YB:%.*]] = stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// FIRST-NEXT:    [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// FIRST-NEXT:    [[YSH:%.*]] = stablehlo.shift_right_logical [[YB]], [[C23]] : tensor<i32>
// FIRST-NEXT:    [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// FIRST-NEXT:    [[YE:%.*]] = stablehlo.subtract [[YSH]], [[C127]] : tensor<i32>
// FIRST-NEXT:    [[XB:%.*]] = stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// FIRST-NEXT:    [[XSH:%.*]] = stablehlo.shift_right_logical [[XB]], [[C23]] : tensor<i32>
// FIRST-NEXT:    [[XE:%.*]] = stablehlo.subtract [[XSH]], [[C127]] : tensor<i32>
// FIRST-NEXT:    [[DY:%.*]] = stablehlo.subtract [[YE]], [[XE]] : tensor<i32>
// FIRST-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// FIRST-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[CM127]], [[DY]], [[C127]] : tensor<i32>
// FIRST-NEXT:    [[DYB:%.*]] = stablehlo.add [[DYC]], [[C127]] : tensor<i32>
// FIRST-NEXT:    [[DYI:%.*]] = stablehlo.shift_left [[DYB]], [[C23]] : tensor<i32>
// FIRST-NEXT:    [[DYF:%.*]] = stablehlo.bitcast_convert [[DYI]] : (tensor<i32>) -> tensor<f32>
// FIRST-NEXT:    [[DYFB:%.*]] = stablehlo.broadcast_in_dim [[DYF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// FIRST-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[DYFB]] : tensor<4xf32>
// FIRST-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Y1]] : tensor<4xf32>
// FIRST-NEXT:    return [[M]], [[XS]] : tensor<4xf32>, tensor<f32>

// f16 data: common-scale=auto means the maximum of the exponents, even for a
// merge op, so both factors are <= 1; the f32 factors multiply the data in f32
// (f16 data converted up, and the product back to f16).

// F16-LABEL: func.func public @main
// F16-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf16>, [[YS:%.*]]: tensor<f32>)
// F16-SAME:    -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[XB:%.*]] = stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// F16-NEXT:    [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// F16-NEXT:    [[XSH:%.*]] = stablehlo.shift_right_logical [[XB]], [[C23]] : tensor<i32>
// F16-NEXT:    [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// F16-NEXT:    [[XE:%.*]] = stablehlo.subtract [[XSH]], [[C127]] : tensor<i32>
// F16-NEXT:    [[YB:%.*]] = stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// F16-NEXT:    [[YSH:%.*]] = stablehlo.shift_right_logical [[YB]], [[C23]] : tensor<i32>
// F16-NEXT:    [[YE:%.*]] = stablehlo.subtract [[YSH]], [[C127]] : tensor<i32>
// F16-NEXT:    [[E:%.*]] = stablehlo.maximum [[XE]], [[YE]] : tensor<i32>
// F16-NEXT:    [[DX:%.*]] = stablehlo.subtract [[XE]], [[E]] : tensor<i32>
// F16-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// F16-NEXT:    [[DXC:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// F16-NEXT:    [[DXB:%.*]] = stablehlo.add [[DXC]], [[C127]] : tensor<i32>
// F16-NEXT:    [[DXI:%.*]] = stablehlo.shift_left [[DXB]], [[C23]] : tensor<i32>
// F16-NEXT:    [[DXF:%.*]] = stablehlo.bitcast_convert [[DXI]] : (tensor<i32>) -> tensor<f32>
// F16-NEXT:    [[X32:%.*]] = stablehlo.convert [[X]] : (tensor<4xf16>) -> tensor<4xf32>
// F16-NEXT:    [[DXFB:%.*]] = stablehlo.broadcast_in_dim [[DXF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// F16-NEXT:    [[X1F:%.*]] = stablehlo.multiply [[X32]], [[DXFB]] : tensor<4xf32>
// F16-NEXT:    [[X1:%.*]] = stablehlo.convert [[X1F]] : (tensor<4xf32>) -> tensor<4xf16>
// F16-NEXT:    [[DY:%.*]] = stablehlo.subtract [[YE]], [[E]] : tensor<i32>
// F16-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[CM127]], [[DY]], [[C127]] : tensor<i32>
// F16-NEXT:    [[DYB:%.*]] = stablehlo.add [[DYC]], [[C127]] : tensor<i32>
// F16-NEXT:    [[DYI:%.*]] = stablehlo.shift_left [[DYB]], [[C23]] : tensor<i32>
// F16-NEXT:    [[DYF:%.*]] = stablehlo.bitcast_convert [[DYI]] : (tensor<i32>) -> tensor<f32>
// F16-NEXT:    [[Y32:%.*]] = stablehlo.convert [[Y]] : (tensor<4xf16>) -> tensor<4xf32>
// F16-NEXT:    [[DYFB:%.*]] = stablehlo.broadcast_in_dim [[DYF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// F16-NEXT:    [[Y1F:%.*]] = stablehlo.multiply [[Y32]], [[DYFB]] : tensor<4xf32>
// F16-NEXT:    [[Y1:%.*]] = stablehlo.convert [[Y1F]] : (tensor<4xf32>) -> tensor<4xf16>
// F16-NEXT:    [[M:%.*]] = stablehlo.maximum [[X1]], [[Y1]] : tensor<4xf16>
// F16-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// F16-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// F16-NEXT:    [[LO:%.*]] = stablehlo.subtract [[E]], [[HI]] : tensor<i32>
// F16-NEXT:    [[LOC:%.*]] = stablehlo.clamp [[CM127]], [[LO]], [[C127]] : tensor<i32>
// F16-NEXT:    [[LOB:%.*]] = stablehlo.add [[LOC]], [[C127]] : tensor<i32>
// F16-NEXT:    [[LOI:%.*]] = stablehlo.shift_left [[LOB]], [[C23]] : tensor<i32>
// F16-NEXT:    [[LOF:%.*]] = stablehlo.bitcast_convert [[LOI]] : (tensor<i32>) -> tensor<f32>
// F16-NEXT:    [[M32:%.*]] = stablehlo.convert [[M]] : (tensor<4xf16>) -> tensor<4xf32>
// F16-NEXT:    [[LOFB:%.*]] = stablehlo.broadcast_in_dim [[LOF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// F16-NEXT:    [[MDF:%.*]] = stablehlo.multiply [[M32]], [[LOFB]] : tensor<4xf32>
// F16-NEXT:    [[MD:%.*]] = stablehlo.convert [[MDF]] : (tensor<4xf32>) -> tensor<4xf16>
// F16-NEXT:    [[HIB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// F16-NEXT:    [[HII:%.*]] = stablehlo.shift_left [[HIB]], [[C23]] : tensor<i32>
// F16-NEXT:    [[MS:%.*]] = stablehlo.bitcast_convert [[HII]] : (tensor<i32>) -> tensor<f32>
// F16-NEXT:    return [[MD]], [[MS]] : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.maximum %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// relu: a zero constant is the same at every scale, so it never forces a
// rescale, not even a runtime midpoint or maximum of exponents; the scale is
// passed through as the argument itself.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Z]] : tensor<4xf32>
// CHECK-NEXT:    return [[M]], [[XS]] : tensor<4xf32>, tensor<f32>

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// FIRST-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// FIRST-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Z]] : tensor<4xf32>
// FIRST-NEXT:    return [[M]], [[XS]] : tensor<4xf32>, tensor<f32>

// F16-LABEL: func.func public @main
// F16-SAME:    ([[X:%.*]]: tensor<4xf16>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf16>
// F16-NEXT:    [[M:%.*]] = stablehlo.maximum [[X]], [[Z]] : tensor<4xf16>
// F16-NEXT:    return [[M]], [[XS]] : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.0> : tensor<4xf32>
  %0 = stablehlo.maximum %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// One operand: the op on the data, the scale passes through untouched.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<2x8xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<16xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reshape [[X]] : (tensor<2x8xf32>) -> tensor<16xf32>
// CHECK-NEXT:    return [[R]], [[XS]] : tensor<16xf32>, tensor<f32>

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<2x8xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<16xf32>, tensor<f32>)
// FIRST-NEXT:    [[R:%.*]] = stablehlo.reshape [[X]] : (tensor<2x8xf32>) -> tensor<16xf32>
// FIRST-NEXT:    return [[R]], [[XS]] : tensor<16xf32>, tensor<f32>
func.func public @main(%arg0: tensor<2x8xf32>) -> tensor<16xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<2x8xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<2x4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4x2xf32>, tensor<f32>)
// CHECK-NEXT:    [[T:%.*]] = stablehlo.transpose [[X]], dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    return [[T]], [[XS]] : tensor<4x2xf32>, tensor<f32>

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<2x4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4x2xf32>, tensor<f32>)
// FIRST-NEXT:    [[T:%.*]] = stablehlo.transpose [[X]], dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
// FIRST-NEXT:    return [[T]], [[XS]] : tensor<4x2xf32>, tensor<f32>
func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<4x2xf32> {
  %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<3x4xf32>, tensor<f32>)
// CHECK-NEXT:    [[B:%.*]] = stablehlo.broadcast_in_dim [[X]], dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    return [[B]], [[XS]] : tensor<3x4xf32>, tensor<f32>

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<3x4xf32>, tensor<f32>)
// FIRST-NEXT:    [[B:%.*]] = stablehlo.broadcast_in_dim [[X]], dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
// FIRST-NEXT:    return [[B]], [[XS]] : tensor<3x4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<3x4xf32> {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// select: the i1 predicate is not scaled; the two float branches are brought
// to the midpoint of their exponents (f32 data), like maximum above.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[P:%.*]]: tensor<4xi1>, [[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[XB:%.*]] = stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK-NEXT:    [[XSH:%.*]] = stablehlo.shift_right_logical [[XB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK-NEXT:    [[XE:%.*]] = stablehlo.subtract [[XSH]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[YB:%.*]] = stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:    [[YSH:%.*]] = stablehlo.shift_right_logical [[YB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[YE:%.*]] = stablehlo.subtract [[YSH]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[ESUM:%.*]] = stablehlo.add [[XE]], [[YE]] : tensor<i32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.shift_right_arithmetic [[ESUM]], [[C1]] : tensor<i32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[XE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[DXC:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXB:%.*]] = stablehlo.add [[DXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXI:%.*]] = stablehlo.shift_left [[DXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DXF:%.*]] = stablehlo.bitcast_convert [[DXI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DXFB:%.*]] = stablehlo.broadcast_in_dim [[DXF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[DXFB]] : tensor<4xf32>
// CHECK-NEXT:    [[DY:%.*]] = stablehlo.subtract [[YE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[CM127]], [[DY]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DYB:%.*]] = stablehlo.add [[DYC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DYI:%.*]] = stablehlo.shift_left [[DYB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DYF:%.*]] = stablehlo.bitcast_convert [[DYI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DYFB:%.*]] = stablehlo.broadcast_in_dim [[DYF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[DYFB]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.select [[P]], [[X1]], [[Y1]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.subtract [[E]], [[HI]] : tensor<i32>
// CHECK-NEXT:    [[LOC:%.*]] = stablehlo.clamp [[CM127]], [[LO]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOB:%.*]] = stablehlo.add [[LOC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOI:%.*]] = stablehlo.shift_left [[LOB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[LOF:%.*]] = stablehlo.bitcast_convert [[LOI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[LOFB:%.*]] = stablehlo.broadcast_in_dim [[LOF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[MD:%.*]] = stablehlo.multiply [[S]], [[LOFB]] : tensor<4xf32>
// CHECK-NEXT:    [[HIB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[HII:%.*]] = stablehlo.shift_left [[HIB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[MS:%.*]] = stablehlo.bitcast_convert [[HII]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[MD]], [[MS]] : tensor<4xf32>, tensor<f32>

// common-scale=first: the second branch is brought to the first's scale.

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[P:%.*]]: tensor<4xi1>, [[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// FIRST-SAME:    -> (tensor<4xf32>, tensor<f32>)
// FIRST-NEXT:    [[YB:%.*]] = stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// FIRST-NEXT:    [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// FIRST-NEXT:    [[YSH:%.*]] = stablehlo.shift_right_logical [[YB]], [[C23]] : tensor<i32>
// FIRST-NEXT:    [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// FIRST-NEXT:    [[YE:%.*]] = stablehlo.subtract [[YSH]], [[C127]] : tensor<i32>
// FIRST-NEXT:    [[XB:%.*]] = stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// FIRST-NEXT:    [[XSH:%.*]] = stablehlo.shift_right_logical [[XB]], [[C23]] : tensor<i32>
// FIRST-NEXT:    [[XE:%.*]] = stablehlo.subtract [[XSH]], [[C127]] : tensor<i32>
// FIRST-NEXT:    [[DY:%.*]] = stablehlo.subtract [[YE]], [[XE]] : tensor<i32>
// FIRST-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// FIRST-NEXT:    [[DYC:%.*]] = stablehlo.clamp [[CM127]], [[DY]], [[C127]] : tensor<i32>
// FIRST-NEXT:    [[DYB:%.*]] = stablehlo.add [[DYC]], [[C127]] : tensor<i32>
// FIRST-NEXT:    [[DYI:%.*]] = stablehlo.shift_left [[DYB]], [[C23]] : tensor<i32>
// FIRST-NEXT:    [[DYF:%.*]] = stablehlo.bitcast_convert [[DYI]] : (tensor<i32>) -> tensor<f32>
// FIRST-NEXT:    [[DYFB:%.*]] = stablehlo.broadcast_in_dim [[DYF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// FIRST-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[DYFB]] : tensor<4xf32>
// FIRST-NEXT:    [[S:%.*]] = stablehlo.select [[P]], [[X]], [[Y1]] : tensor<4xi1>, tensor<4xf32>
// FIRST-NEXT:    return [[S]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xi1>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A float made from another type (the f32 abs of a complex value) has no scale
// to carry: the op runs as it is and its result is encoded at scale 1, in the
// data type (f16 here: the op itself keeps its f32 result).

// F16-LABEL: func.func public @main({{%[^:]+}}: tensor<4xcomplex<f32>>)
// F16-SAME:    -> (tensor<4xf16>, tensor<f32>)
// F16-NEXT:    [[A:%.*]] = stablehlo.abs {{%[^ ]+}} : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
// F16-NEXT:    [[D:%.*]] = stablehlo.convert [[A]] : (tensor<4xf32>) -> tensor<4xf16>
// F16:         return [[D]], {{%.*}} : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xcomplex<f32>>) -> tensor<4xf32> {
  %0 = stablehlo.abs %arg0 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A constant branch of a select follows the runtime branch's scale, but only
// down to the lowest scale at which the constant's data stays in the data
// type's range: 2^-14 for 1.0 in f16 (data below 2 times 2^14). Below it, 1.0
// would saturate to inf (a zero tensor's norm has the f16 zero scale 2^-126).

// F16-LABEL: func.func public @main({{%[^:]+}}: tensor<4xi1>, {{%[^:]+}}: tensor<4xf16>, {{%[^:]+}}: tensor<f32>)
// F16:         [[E:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<i32>
// F16-NEXT:    [[FLOOR:%.*]] = stablehlo.constant dense<-14> : tensor<i32>
// F16-NEXT:    [[COMMON:%.*]] = stablehlo.maximum [[E]], [[FLOOR]] : tensor<i32>
// F16:         stablehlo.select
func.func public @main(%arg0: tensor<4xi1>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
  %0 = stablehlo.select %arg0, %arg1, %cst : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A sentinel beyond f16's range at scale 1 (a mask's -1e9) has no floor: it
// takes the runtime branch's scale and saturates to -inf, which keeps its sign
// and order, instead of pushing the runtime data below f16's normal range.

// F16-LABEL: func.func public @main({{%[^:]+}}: tensor<4xi1>, {{%[^:]+}}: tensor<4xf16>,
// F16-SAME:    [[S:%[^:]+]]: tensor<f32>)
// F16-NOT:     stablehlo.maximum
// F16:         [[SEL:%.*]] = stablehlo.select {{%.*}}, {{%.*}}, {{%.*}} : tensor<4xi1>, tensor<4xf16>
// F16-NEXT:    return [[SEL]], [[S]] : tensor<4xf16>, tensor<f32>
func.func public @main(%arg0: tensor<4xi1>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<-1.000000e+09> : tensor<4xf32>
  %0 = stablehlo.select %arg0, %arg1, %cst : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

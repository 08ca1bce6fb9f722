// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 common-scale=max}' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f32 common-scale=first}' | filecheck %s --check-prefix FIRST

// Additive family (add, subtract): operands rescaled to a common power-of-two
// scale, then added; the result has the common scale. Runtime scales are i32
// exponents: an f32 scale argument s becomes e = (bits(s) >> 23) - 127, and
// data is multiplied by 2^k through a factor built from bits,
// bitcast((clamp(-127, k, 127) + 127) << 23). The FIRST prefix (common-scale=first,
// what auto means for f32 and bf16 data) checks only the first three cases.

// Two runtime scales. common-scale=max (auto for f16 data): the sum
// takes e = max(e_x, e_y), both data are multiplied by 2^(e_x - e) and
// 2^(e_y - e) (they shrink or stay). At the result, the f32 scale is
// 2^clamp(e, -126, 127) and the data takes the excess 2^(e - that clamp).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[EY:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.maximum [[EX]], [[EY]] : tensor<i32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[EX]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KX:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KXB:%.*]] = stablehlo.add [[KX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KXS:%.*]] = stablehlo.shift_left [[KXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FX:%.*]] = stablehlo.bitcast_convert [[KXS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FXB:%.*]] = stablehlo.broadcast_in_dim [[FX]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[FXB]] : tensor<4xf32>
// CHECK-NEXT:    [[DY:%.*]] = stablehlo.subtract [[EY]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[KY:%.*]] = stablehlo.clamp [[CM127]], [[DY]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KYB:%.*]] = stablehlo.add [[KY]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KYS:%.*]] = stablehlo.shift_left [[KYB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FY:%.*]] = stablehlo.bitcast_convert [[KYS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FYB:%.*]] = stablehlo.broadcast_in_dim [[FY]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[FYB]] : tensor<4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.add [[X1]], [[Y1]] : tensor<4xf32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[EXC:%.*]] = stablehlo.subtract [[E]], [[HI]] : tensor<i32>
// CHECK-NEXT:    [[KL:%.*]] = stablehlo.clamp [[CM127]], [[EXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLB:%.*]] = stablehlo.add [[KL]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLS:%.*]] = stablehlo.shift_left [[KLB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FL:%.*]] = stablehlo.bitcast_convert [[KLS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FLB:%.*]] = stablehlo.broadcast_in_dim [[FL]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.multiply [[A]], [[FLB]] : tensor<4xf32>
// CHECK-NEXT:    [[KSB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KSS:%.*]] = stablehlo.shift_left [[KSB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.bitcast_convert [[KSS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>

// common-scale=first: the sum takes x's scale, returned as the argument
// itself, and y's data is multiplied by 2^(e_y - e_x).

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// FIRST-SAME:    -> (tensor<4xf32>, tensor<f32>)
// FIRST:         stablehlo.bitcast_convert [[YS]] : (tensor<f32>) -> tensor<i32>
// FIRST:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// FIRST:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// FIRST:         [[EY:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// FIRST:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// FIRST:         [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// FIRST-NEXT:    [[DY:%.*]] = stablehlo.subtract [[EY]], [[EX]] : tensor<i32>
// FIRST-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// FIRST-NEXT:    [[KY:%.*]] = stablehlo.clamp [[CM127]], [[DY]], [[C127]] : tensor<i32>
// FIRST-NEXT:    [[KYB:%.*]] = stablehlo.add [[KY]], [[C127]] : tensor<i32>
// FIRST-NEXT:    [[KYS:%.*]] = stablehlo.shift_left [[KYB]], [[C23]] : tensor<i32>
// FIRST-NEXT:    [[FY:%.*]] = stablehlo.bitcast_convert [[KYS]] : (tensor<i32>) -> tensor<f32>
// FIRST-NEXT:    [[FYB:%.*]] = stablehlo.broadcast_in_dim [[FY]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// FIRST-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[FYB]] : tensor<4xf32>
// FIRST-NEXT:    [[A:%.*]] = stablehlo.add [[X]], [[Y1]] : tensor<4xf32>
// FIRST-NEXT:    return [[A]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A constant: 3.0 splits into data 1.5 at the static scale 2^1 (the i32
// exponent constant 1). The sum takes e = max(e_x, 1); x's data is multiplied
// by 2^(e_x - e) and the constant's by 2^(1 - e).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.500000e+00> : tensor<4xf32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.maximum [[EX]], [[ONE]] : tensor<i32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[EX]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KX:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KXB:%.*]] = stablehlo.add [[KX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KXS:%.*]] = stablehlo.shift_left [[KXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FX:%.*]] = stablehlo.bitcast_convert [[KXS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FXB:%.*]] = stablehlo.broadcast_in_dim [[FX]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[FXB]] : tensor<4xf32>
// CHECK-NEXT:    [[DC:%.*]] = stablehlo.subtract [[ONE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[KC:%.*]] = stablehlo.clamp [[CM127]], [[DC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KCB:%.*]] = stablehlo.add [[KC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KCS:%.*]] = stablehlo.shift_left [[KCB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FC:%.*]] = stablehlo.bitcast_convert [[KCS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FCB:%.*]] = stablehlo.broadcast_in_dim [[FC]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.multiply [[C]], [[FCB]] : tensor<4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.add [[X1]], [[C1]] : tensor<4xf32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[EXC:%.*]] = stablehlo.subtract [[E]], [[HI]] : tensor<i32>
// CHECK-NEXT:    [[KL:%.*]] = stablehlo.clamp [[CM127]], [[EXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLB:%.*]] = stablehlo.add [[KL]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLS:%.*]] = stablehlo.shift_left [[KLB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FL:%.*]] = stablehlo.bitcast_convert [[KLS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FLB:%.*]] = stablehlo.broadcast_in_dim [[FL]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.multiply [[A]], [[FLB]] : tensor<4xf32>
// CHECK-NEXT:    [[KSB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KSS:%.*]] = stablehlo.shift_left [[KSB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.bitcast_convert [[KSS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>

// common-scale=first takes the same maximum where a constant meets a runtime
// scale: brought to x's scale as it is, 3.0 passes f32's range once x's scale
// is below 2^-125 (a layer norm's var + eps over values near 1e-24).

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// FIRST-SAME:    -> (tensor<4xf32>, tensor<f32>)
// FIRST:         [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// FIRST-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// FIRST-NEXT:    [[E:%.*]] = stablehlo.maximum [[EX]], [[ONE]] : tensor<i32>
// FIRST:         [[X1:%.*]] = stablehlo.multiply %arg0, {{.*}} : tensor<4xf32>
// FIRST:         [[DC:%.*]] = stablehlo.subtract [[ONE]], [[E]] : tensor<i32>
// FIRST:         [[A:%.*]] = stablehlo.add [[X1]], {{.*}} : tensor<4xf32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<3.0> : tensor<4xf32>
  %0 = stablehlo.add %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A zero constant is 'any scale': it is added as is and never forces a
// rescale, under either common-scale rule; x's scale is returned as is.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.add [[X]], [[Z]] : tensor<4xf32>
// CHECK-NEXT:    return [[A]], [[XS]] : tensor<4xf32>, tensor<f32>

// FIRST-LABEL: func.func public @main
// FIRST-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// FIRST-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// FIRST-NEXT:    [[A:%.*]] = stablehlo.add [[X]], [[Z]] : tensor<4xf32>
// FIRST-NEXT:    return [[A]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.0> : tensor<4xf32>
  %0 = stablehlo.add %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Two static scales: the larger one (2^1) is chosen at rewrite time and 0.5
// (data 1.0 at 2^-1) is shifted by the static factor 2^-2; no runtime scale op,
// and the static result scale is returned as an f32 constant.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[A:%.*]] = stablehlo.constant dense<1.500000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[B:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[Q:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<4xf32>
// CHECK-NEXT:    [[B1:%.*]] = stablehlo.multiply [[B]], [[Q]] : tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.subtract [[A]], [[B1]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[D]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<3.0> : tensor<4xf32>
  %cst_0 = stablehlo.constant dense<0.5> : tensor<4xf32>
  %0 = stablehlo.subtract %cst, %cst_0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file \
// RUN:   --pipeline 'scalify{data-dtype=f32 common-scale=max}' | filecheck %s --check-prefix MAX

// Additive family (add, subtract): operands rescaled to a common power-of-two
// scale, then added; the result has the common scale. The MAX prefix checks
// only the first three cases.

// Two runtime scales. common-scale=first (the default for f32 data): the sum
// takes x's scale and y's data is multiplied by y_s / x_s.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]] = stablehlo.divide [[YS]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[R]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[RB]] : tensor<4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.add [[X]], [[Y1]] : tensor<4xf32>
// CHECK-NEXT:    return [[A]], [[XS]] : tensor<4xf32>, tensor<f32>

// common-scale=max: the sum takes max(x_s, y_s); both data shrink or stay.

// MAX-LABEL: func.func public @main
// MAX-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// MAX-NEXT:    [[S:%.*]] = stablehlo.maximum [[XS]], [[YS]] : tensor<f32>
// MAX-NEXT:    [[RX:%.*]] = stablehlo.divide [[XS]], [[S]] : tensor<f32>
// MAX-NEXT:    [[RXB:%.*]] = stablehlo.broadcast_in_dim [[RX]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// MAX-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[RXB]] : tensor<4xf32>
// MAX-NEXT:    [[RY:%.*]] = stablehlo.divide [[YS]], [[S]] : tensor<f32>
// MAX-NEXT:    [[RYB:%.*]] = stablehlo.broadcast_in_dim [[RY]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// MAX-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[RYB]] : tensor<4xf32>
// MAX-NEXT:    [[A:%.*]] = stablehlo.add [[X1]], [[Y1]] : tensor<4xf32>
// MAX-NEXT:    return [[A]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A constant: 3.0 splits into data 1.5 at the static scale 2^1, and is brought
// to x's runtime scale by the factor 2 / x_s.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.500000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[INV:%.*]] = stablehlo.divide [[ONE]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.multiply [[INV]], [[TWO]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[R]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.multiply [[C]], [[RB]] : tensor<4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.add [[X]], [[C1]] : tensor<4xf32>
// CHECK-NEXT:    return [[A]], [[XS]] : tensor<4xf32>, tensor<f32>

// common-scale=max: the runtime maximum of x_s and the static 2.0.

// MAX-LABEL: func.func public @main
// MAX-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// MAX-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.500000e+00> : tensor<4xf32>
// MAX-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// MAX-NEXT:    [[S:%.*]] = stablehlo.maximum [[XS]], [[TWO]] : tensor<f32>
// MAX-NEXT:    [[RX:%.*]] = stablehlo.divide [[XS]], [[S]] : tensor<f32>
// MAX-NEXT:    [[RXB:%.*]] = stablehlo.broadcast_in_dim [[RX]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// MAX-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[RXB]] : tensor<4xf32>
// MAX-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// MAX-NEXT:    [[INV:%.*]] = stablehlo.divide [[ONE]], [[S]] : tensor<f32>
// MAX-NEXT:    [[RC:%.*]] = stablehlo.multiply [[INV]], [[TWO]] : tensor<f32>
// MAX-NEXT:    [[RCB:%.*]] = stablehlo.broadcast_in_dim [[RC]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// MAX-NEXT:    [[C1:%.*]] = stablehlo.multiply [[C]], [[RCB]] : tensor<4xf32>
// MAX-NEXT:    [[A:%.*]] = stablehlo.add [[X1]], [[C1]] : tensor<4xf32>
// MAX-NEXT:    return [[A]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<3.0> : tensor<4xf32>
  %0 = stablehlo.add %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A zero constant is 'any scale': it is added as is and never forces a
// rescale, under either common-scale rule.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.add [[X]], [[Z]] : tensor<4xf32>
// CHECK-NEXT:    return [[A]], [[XS]] : tensor<4xf32>, tensor<f32>

// MAX-LABEL: func.func public @main
// MAX-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// MAX-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// MAX-NEXT:    [[A:%.*]] = stablehlo.add [[X]], [[Z]] : tensor<4xf32>
// MAX-NEXT:    return [[A]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.0> : tensor<4xf32>
  %0 = stablehlo.add %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Two static scales: the larger one (2^1) is chosen at rewrite time and 0.5
// (data 1.0 at 2^-1) is shifted by the static factor 2^-2; no runtime scale op.

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

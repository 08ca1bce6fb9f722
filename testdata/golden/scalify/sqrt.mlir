// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Sqrt family (sqrt, rsqrt): the scale exponent is halved (sqrt) or halved and
// negated (rsqrt). When it is odd, one factor 2 moves into the data first, so
// the result scale stays an exact power of two.

// Static even exponent: 16.0 is data 1.0 at 2^4; sqrt has scale 2^2, data
// untouched.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.sqrt [[C]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<4.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<16.0> : tensor<4xf32>
  %0 = stablehlo.sqrt %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Static odd exponent: 9.0 is data 1.125 at 2^3; the data is doubled (2.25 at
// 2^2) and sqrt gives 1.5 at 2^1 = 3.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.125000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[C2:%.*]] = stablehlo.multiply [[C]], [[TWO]] : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.sqrt [[C2]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<9.0> : tensor<4xf32>
  %0 = stablehlo.sqrt %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// rsqrt of the same: rsqrt(2.25) at 2^-1 = 1/3.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.125000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[C2:%.*]] = stablehlo.multiply [[C]], [[TWO]] : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.rsqrt [[C2]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<9.0> : tensor<4xf32>
  %0 = stablehlo.rsqrt %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Negative odd exponent: 0.125 is data 1.0 at 2^-3; the data is doubled (2.0
// at 2^-4) and sqrt gives sqrt(2) at 2^-2.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[TWO:%.*]] = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[C2:%.*]] = stablehlo.multiply [[C]], [[TWO]] : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.sqrt [[C2]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.125> : tensor<4xf32>
  %0 = stablehlo.sqrt %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Runtime scale: h = sqrt(x_s) rounded to a power of two by reduce_precision
// with no mantissa bits (sqrt(2) * 2^m rounds down to 2^m), and x_s / h^2
// (1 or 2) goes into the data. The result scale is h.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[Q:%.*]] = stablehlo.sqrt [[XS]] : tensor<f32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.reduce_precision [[Q]], format = e8m0 : tensor<f32>
// CHECK-NEXT:    [[H2:%.*]] = stablehlo.multiply [[H]], [[H]] : tensor<f32>
// CHECK-NEXT:    [[REST:%.*]] = stablehlo.divide [[XS]], [[H2]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[REST]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[RB]] : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.sqrt [[X1]] : tensor<4xf32>
// CHECK-NEXT:    return [[R]], [[H]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sqrt %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// rsqrt with a runtime scale: the same split, result scale 1 / h.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[Q:%.*]] = stablehlo.sqrt [[XS]] : tensor<f32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.reduce_precision [[Q]], format = e8m0 : tensor<f32>
// CHECK-NEXT:    [[H2:%.*]] = stablehlo.multiply [[H]], [[H]] : tensor<f32>
// CHECK-NEXT:    [[REST:%.*]] = stablehlo.divide [[XS]], [[H2]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[REST]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[RB]] : tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.rsqrt [[X1]] : tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.divide [[ONE]], [[H]] : tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.rsqrt %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

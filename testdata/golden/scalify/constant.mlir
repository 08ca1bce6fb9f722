// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Constant family: a float constant is split at rewrite time into data and a
// static power-of-two scale 2^e, with 2^e <= max|finite value| < 2^(e+1).
// NaN and Inf are ignored when choosing e (never an infinite scale), and a
// constant with no finite non-zero value gets scale 1. The static scale costs
// nothing until a consumer needs it (see multiply.mlir: x * 0.1).

// Splat 0.1 = 1.6 * 2^-4.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.600000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<6.250000e-02> : tensor<f32>
// CHECK-NEXT:    return [[C]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.1> : tensor<4xf32>
  return %cst : tensor<4xf32>
}

// -----

// Static scales fold at rewrite time: 0.1 * 0.1 is (1.6 * 1.6) at 2^-8, with no
// runtime scale op.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.600000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.multiply [[C]], [[C]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<3.906250e-03> : tensor<f32>
// CHECK-NEXT:    return [[M]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.1> : tensor<4xf32>
  %0 = stablehlo.multiply %cst, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Non-splat: the largest magnitude (5.0) sets e = 2; every element is divided
// by 4, zeros stay zero.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<[2.500000e-02, 7.500000e-01, -1.250000e+00, 0.000000e+00]> : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<4.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[C]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<[0.1, 3.0, -5.0, 0.0]> : tensor<4xf32>
  return %cst : tensor<4xf32>
}

// -----

// NaN, +Inf and -Inf beside 6.0: the scale comes from 6.0 alone (2^2), the
// special values stay as they are in the data.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<[0x7FC00000, 0x7F800000, 0xFF800000, 1.500000e+00]> : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<4.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[C]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<[0x7FC00000, 0x7F800000, 0xFF800000, 6.0]> : tensor<4xf32>
  return %cst : tensor<4xf32>
}

// -----

// All NaN: scale 1, not NaN or Inf.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<0x7FC00000> : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[C]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0x7FC00000> : tensor<4xf32>
  return %cst : tensor<4xf32>
}

// -----

// An Inf constant is the same at every scale: x + inf adds it as is, without
// rescaling either side (where(x, nan) must not make an infinite scale).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[INF:%.*]] = stablehlo.constant dense<0x7F800000> : tensor<4xf32>
// CHECK-NEXT:    [[A:%.*]] = stablehlo.add [[X]], [[INF]] : tensor<4xf32>
// CHECK-NEXT:    return [[A]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0x7F800000> : tensor<4xf32>
  %0 = stablehlo.add %arg0, %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Zero: data 0 at scale 1.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[C]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.0> : tensor<4xf32>
  return %cst : tensor<4xf32>
}

// -----

// A large constant: 1e30 = 1.5777218 * 2^99, no overflow in data or scale.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.57772183> : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<6.338253E+29> : tensor<f32>
// CHECK-NEXT:    return [[C]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<1.0e+30> : tensor<4xf32>
  return %cst : tensor<4xf32>
}

// -----

// Integer constants are not scaled.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> tensor<4xi32>
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<7> : tensor<4xi32>
// CHECK-NEXT:    return [[C]] : tensor<4xi32>
func.func public @main() -> tensor<4xi32> {
  %c = stablehlo.constant dense<7> : tensor<4xi32>
  return %c : tensor<4xi32>
}

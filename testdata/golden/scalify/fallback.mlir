// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix WARN
// RUN: not scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 strict=true}' \
// RUN:   2>&1 >/dev/null | filecheck %s --check-prefix STRICT

// Fallback: an op with no rule runs on the unscaled values in the original
// types, its float results are re-encoded at scale 1, and it is reported (a
// warning; an error under scalify{strict=true}). Ops that touch no float are
// copied as they are and not reported.
//
// Unscaling multiplies the data by its argument's scale x_s, an f32 power of two, as it
// is (a scale computed in the program is applied in two factors: nonlinear.mlir).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<3x3xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<3x3xf32>, tensor<f32>)
// CHECK-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<3x3xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[XSB]] : tensor<3x3xf32>
// CHECK-NEXT:    [[L:%.*]] = stablehlo.cholesky [[U]], lower = true : tensor<3x3xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[L]], [[ONE]] : tensor<3x3xf32>, tensor<f32>

// WARN: warning: {{.*}}stablehlo.cholesky has no scale rule; running it unscaled (scale 1)
// WARN-NOT: warning

// STRICT: error: {{.*}}stablehlo.cholesky has no scale rule (scalify strict mode)
func.func public @main(%arg0: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %0 = stablehlo.cholesky %arg0, lower = true : tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

// An integer-only op without a rule: copied, not reported (the WARN-NOT above
// covers this case too).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[I:%.*]]: tensor<4xi32>) -> tensor<4xi32>
// CHECK-NEXT:    [[P:%.*]] = stablehlo.popcnt [[I]] : tensor<4xi32>
// CHECK-NEXT:    return [[P]] : tensor<4xi32>
func.func public @main(%arg0: tensor<4xi32>) -> tensor<4xi32> {
  %0 = stablehlo.popcnt %arg0 : tensor<4xi32>
  return %0 : tensor<4xi32>
}

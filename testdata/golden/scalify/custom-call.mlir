// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix WARN
// RUN: not scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 strict=true}' \
// RUN:   2>&1 >/dev/null | filecheck %s --check-prefix STRICT

// Custom-call family: layout-only targets (Sharding, SPMD shape changes, ...)
// pass the data through and keep the scale. Any other target runs on the
// unscaled values, its result is re-encoded at scale 1, and it is reported: a
// warning, or an error under scalify{strict=true}.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.custom_call @Sharding([[X]]) {mhlo.sharding = "{replicated}"} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return [[C]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{replicated}"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// An unknown target: x is unscaled first (its data times its argument's scale, an f32
// power of two, as it is); the custom call's result is returned at scale 1.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[XSB]] : tensor<4xf32>
// CHECK-NEXT:    [[C:%.*]] = stablehlo.custom_call @my_kernel([[U]]) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[C]], [[ONE]] : tensor<4xf32>, tensor<f32>

// Only the unknown target is reported (once), never Sharding.
// WARN-NOT: Sharding
// WARN: warning: {{.*}}stablehlo.custom_call (target 'my_kernel') has no scale rule; running it unscaled (scale 1)
// WARN-NOT: warning

// STRICT-NOT: warning
// STRICT: error: {{.*}}stablehlo.custom_call (target 'my_kernel') has no scale rule (scalify strict mode)
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

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

// An unknown target: x is unscaled first. The i32 exponent e of x's scale is
// applied in two factors, high = 2^clamp(e, -126, 127) and the rest
// low = 2^clamp(e - clamp(e, -126, 127), -127, 127), two multiplies; the
// custom call's result is returned at scale 1.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[E:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[KH:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KHB:%.*]] = stablehlo.add [[KH]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KHS:%.*]] = stablehlo.shift_left [[KHB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FH:%.*]] = stablehlo.bitcast_convert [[KHS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FHB:%.*]] = stablehlo.broadcast_in_dim [[FH]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[UH:%.*]] = stablehlo.multiply [[X]], [[FHB]] : tensor<4xf32>
// CHECK-NEXT:    [[EXC:%.*]] = stablehlo.subtract [[E]], [[KH]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KL:%.*]] = stablehlo.clamp [[CM127]], [[EXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLB:%.*]] = stablehlo.add [[KL]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLS:%.*]] = stablehlo.shift_left [[KLB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FL:%.*]] = stablehlo.bitcast_convert [[KLS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FLB:%.*]] = stablehlo.broadcast_in_dim [[FL]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[UH]], [[FLB]] : tensor<4xf32>
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

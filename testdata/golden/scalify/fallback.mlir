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
// Unscaling multiplies the data by 2^e (e the i32 exponent of x_s) in two
// factors built from bits, high = 2^clamp(e, -126, 127) and
// low = 2^clamp(e - high's exponent, -127, 127), so an exponent outside the
// normal f32 range still reaches the data (2^-127 is built as 0).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<3x3xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<3x3xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[E:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[HLO:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HE:%.*]] = stablehlo.clamp [[HLO]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[HB:%.*]] = stablehlo.add [[HE]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[HBITS:%.*]] = stablehlo.shift_left [[HB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[HF:%.*]] = stablehlo.bitcast_convert [[HBITS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[HFB:%.*]] = stablehlo.broadcast_in_dim [[HF]], dims = [] : (tensor<f32>) -> tensor<3x3xf32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.multiply [[X]], [[HFB]] : tensor<3x3xf32>
// CHECK-NEXT:    [[REST:%.*]] = stablehlo.subtract [[E]], [[HE]] : tensor<i32>
// CHECK-NEXT:    [[LLO:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[LE:%.*]] = stablehlo.clamp [[LLO]], [[REST]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LB:%.*]] = stablehlo.add [[LE]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LBITS:%.*]] = stablehlo.shift_left [[LB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[LF:%.*]] = stablehlo.bitcast_convert [[LBITS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[LFB:%.*]] = stablehlo.broadcast_in_dim [[LF]], dims = [] : (tensor<f32>) -> tensor<3x3xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[U1]], [[LFB]] : tensor<3x3xf32>
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

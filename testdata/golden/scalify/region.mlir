// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix WARN

// Region family (sort): when the comparator commutes with a positive
// power-of-two scale (compare, select, max, ...), the sort runs on the data at
// a common scale, region retyped to the data dtype; otherwise it runs unscaled
// and is reported.

// One operand: sorted as is, the scale passes through.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[S:%.*]] = "stablehlo.sort"([[X]]) <{dimension = 0 : i64, is_stable = true}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      [[LT:%.*]] = stablehlo.compare LT, [[A]], [[B]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:      stablehlo.return [[LT]] : tensor<i1>
// CHECK-NEXT:    }) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return [[S]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.sort"(%arg0) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Float keys with an integer payload (argsort): only the keys are scaled.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<4xi32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>, tensor<4xi32>)
// CHECK-NEXT:    [[S:%.*]]:2 = "stablehlo.sort"([[X]], [[I]]) <{dimension = 0 : i64, is_stable = true}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>, {{%.*}}: tensor<i32>, {{%.*}}: tensor<i32>):
// CHECK-NEXT:      [[LT:%.*]] = stablehlo.compare LT, [[A]], [[B]], TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:      stablehlo.return [[LT]] : tensor<i1>
// CHECK-NEXT:    }) : (tensor<4xf32>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>)
// CHECK-NEXT:    return [[S]]#0, [[XS]], [[S]]#1 : tensor<4xf32>, tensor<f32>, tensor<4xi32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %0:2 = "stablehlo.sort"(%arg0, %arg1) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %1 = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }) : (tensor<4xf32>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xi32>
}

// -----

// Two float operands with different runtime scales: both are brought to the
// first one's scale, and both results carry it.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[Y:%.*]]: tensor<4xf32>, [[YS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]] = stablehlo.divide [[YS]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[R]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Y1:%.*]] = stablehlo.multiply [[Y]], [[RB]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]]:2 = "stablehlo.sort"([[X]], [[Y1]]) <{dimension = 0 : i64, is_stable = true}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>, {{%.*}}: tensor<f32>, {{%.*}}: tensor<f32>):
// CHECK-NEXT:      [[LT:%.*]] = stablehlo.compare LT, [[A]], [[B]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:      stablehlo.return [[LT]] : tensor<i1>
// CHECK-NEXT:    }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:    return [[S]]#0, [[XS]], [[S]]#1, [[XS]] : tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0:2 = "stablehlo.sort"(%arg0, %arg1) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>, %d: tensor<f32>):
    %1 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A comparator that reads the float bits (bitcast_convert) is not known to
// commute with scaling: the sort runs on the unscaled values (x_d * x_s), its
// result is re-encoded at scale 1, and the fallback is reported.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[SB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[SB]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = "stablehlo.sort"([[U]]) <{dimension = 0 : i64, is_stable = true}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      [[IA:%.*]] = stablehlo.bitcast_convert [[A]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:      [[IB:%.*]] = stablehlo.bitcast_convert [[B]] : (tensor<f32>) -> tensor<i32>
// CHECK-NEXT:      [[LT:%.*]] = stablehlo.compare LT, [[IA]], [[IB]], SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:      stablehlo.return [[LT]] : tensor<i1>
// CHECK-NEXT:    }) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[S]], [[ONE]] : tensor<4xf32>, tensor<f32>

// WARN: warning: {{.*}}stablehlo.sort has a region that does not commute with scaling; running it unscaled (scale 1)
// WARN-NOT: warning
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.sort"(%arg0) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %ia = stablehlo.bitcast_convert %a : (tensor<f32>) -> tensor<i32>
    %ib = stablehlo.bitcast_convert %b : (tensor<f32>) -> tensor<i32>
    %1 = stablehlo.compare LT, %ia, %ib, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

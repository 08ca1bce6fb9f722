// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 common-scale=max}' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix WARN

// Reduce family (reduce, reduce_window): inputs and inits at one common scale.
// A sum over N elements moves 2^k ~ sqrt(N) from the data to the scale
// (data * 2^-k, i32 exponent + k); max and min leave the scale unchanged. A
// reducer that does not commute with scaling runs unscaled and is reported.
// At a result the exponent e becomes the f32 scale 2^clamp(e, -126, 127), the
// excess multiplied into the data.

// Sum over N = 16: data * 2^-2, exponent x_e + 2. The 0 init is the same at
// every scale and is used as is.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4x16xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reduce([[X]] init: [[Z]]) applies stablehlo.add across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Q:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<4xf32>
// CHECK-NEXT:    [[R1:%.*]] = stablehlo.multiply [[R]], [[Q]] : tensor<4xf32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[K:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.add [[XE]], [[K]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[EH:%.*]] = stablehlo.clamp {{%.*}}, [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EX:%.*]] = stablehlo.subtract [[E]], [[EH]] : tensor<i32>
// CHECK:         [[R2:%.*]] = stablehlo.multiply [[R1]], {{%.*}} : tensor<4xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R2]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4x16xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Max with a -inf init: no sqrt(N) factor, the scale passes through (returned
// as the argument's scale itself, no exponent work), and -inf needs no rescale.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4x16xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[NINF:%.*]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reduce([[X]] init: [[NINF]]) applies stablehlo.maximum across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    return [[R]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4x16xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A non-zero init (1.0, exponent 0) and x meet at the common exponent
// M = max(x_e, 0) (i32 maximum): x's data is multiplied by 2^(x_e - M) and the
// init by 2^-M (flush factors, 2^-127 built as 0); the sum's exponent is M + 2.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4x16xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[I:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[XEC23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[XEC127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.maximum [[XE]], [[Z]] : tensor<i32>
// CHECK-NEXT:    [[XD:%.*]] = stablehlo.subtract [[XE]], [[M]] : tensor<i32>
// CHECK-NEXT:    [[XLO:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[XC:%.*]] = stablehlo.clamp [[XLO]], [[XD]], [[XEC127]] : tensor<i32>
// CHECK-NEXT:    [[XB:%.*]] = stablehlo.add [[XC]], [[XEC127]] : tensor<i32>
// CHECK-NEXT:    [[XFBITS:%.*]] = stablehlo.shift_left [[XB]], [[XEC23]] : tensor<i32>
// CHECK-NEXT:    [[XF:%.*]] = stablehlo.bitcast_convert [[XFBITS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[XFB:%.*]] = stablehlo.broadcast_in_dim [[XF]], dims = [] : (tensor<f32>) -> tensor<4x16xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[XFB]] : tensor<4x16xf32>
// CHECK-NEXT:    [[NM:%.*]] = stablehlo.negate [[M]] : tensor<i32>
// CHECK-NEXT:    [[IC:%.*]] = stablehlo.clamp [[XLO]], [[NM]], [[XEC127]] : tensor<i32>
// CHECK-NEXT:    [[IB:%.*]] = stablehlo.add [[IC]], [[XEC127]] : tensor<i32>
// CHECK-NEXT:    [[IFBITS:%.*]] = stablehlo.shift_left [[IB]], [[XEC23]] : tensor<i32>
// CHECK-NEXT:    [[IF:%.*]] = stablehlo.bitcast_convert [[IFBITS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[I1:%.*]] = stablehlo.multiply [[I]], [[IF]] : tensor<f32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reduce([[X1]] init: [[I1]]) applies stablehlo.add across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[Q:%.*]] = stablehlo.constant dense<2.500000e-01> : tensor<4xf32>
// CHECK-NEXT:    [[R1:%.*]] = stablehlo.multiply [[R]], [[Q]] : tensor<4xf32>
// CHECK-NEXT:    [[K:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.add [[M]], [[K]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[EH:%.*]] = stablehlo.clamp {{%.*}}, [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EX:%.*]] = stablehlo.subtract [[E]], [[EH]] : tensor<i32>
// CHECK:         [[R2:%.*]] = stablehlo.multiply [[R1]], {{%.*}} : tensor<4xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R2]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4x16xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<1.0> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Argmax (a variadic reducer of compare and select): the float operand keeps
// its scale, the integer one is untouched.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4x16xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<4x16xi32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>, tensor<4xi32>)
// CHECK-NEXT:    [[NINF:%.*]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:    [[R:%.*]]:2 = stablehlo.reduce([[X]] init: [[NINF]]), ([[I]] init: [[Z]]) across dimensions = [1] : (tensor<4x16xf32>, tensor<4x16xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>)
// CHECK-NEXT:     reducer([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>) ([[C:%.*]]: tensor<i32>, [[D:%.*]]: tensor<i32>)  {
// CHECK-NEXT:      [[GE:%.*]] = stablehlo.compare GE, [[A]], [[B]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:      [[V:%.*]] = stablehlo.select [[GE]], [[A]], [[B]] : tensor<i1>, tensor<f32>
// CHECK-NEXT:      [[J:%.*]] = stablehlo.select [[GE]], [[C]], [[D]] : tensor<i1>, tensor<i32>
// CHECK-NEXT:      stablehlo.return [[V]], [[J]] : tensor<f32>, tensor<i32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return [[R]]#0, [[XS]], [[R]]#1 : tensor<4xf32>, tensor<f32>, tensor<4xi32>
func.func public @main(%arg0: tensor<4x16xf32>, %arg1: tensor<4x16xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.reduce(%arg0 init: %cst), (%arg1 init: %c) across dimensions = [1] : (tensor<4x16xf32>, tensor<4x16xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%c1: tensor<i32>, %d: tensor<i32>)  {
    %1 = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = stablehlo.select %1, %a, %b : tensor<i1>, tensor<f32>
    %3 = stablehlo.select %1, %c1, %d : tensor<i1>, tensor<i32>
    stablehlo.return %2, %3 : tensor<f32>, tensor<i32>
  }
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xi32>
}

// -----

// reduce_window sum: N is the window size (4), not the padded input: data *
// 2^-1, exponent x_e + 1.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<1x8xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<1x4xf32>, tensor<f32>)
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[R:%.*]] = "stablehlo.reduce_window"([[X]], [[Z]]) <{padding = dense<{{\[\[}}0, 0], [1, 1]]> : tensor<2x2xi64>, window_dimensions = array<i64: 1, 4>, window_strides = array<i64: 1, 2>}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      [[ADD:%.*]] = stablehlo.add [[A]], [[B]] : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[ADD]] : tensor<f32>
// CHECK-NEXT:    }) : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x4xf32>
// CHECK-NEXT:    [[H:%.*]] = stablehlo.constant dense<5.000000e-01> : tensor<1x4xf32>
// CHECK-NEXT:    [[R1:%.*]] = stablehlo.multiply [[R]], [[H]] : tensor<1x4xf32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[K:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.add [[XE]], [[K]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[EH:%.*]] = stablehlo.clamp {{%.*}}, [[E]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EX:%.*]] = stablehlo.subtract [[E]], [[EH]] : tensor<i32>
// CHECK:         [[R2:%.*]] = stablehlo.multiply [[R1]], {{%.*}} : tensor<1x4xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R2]], [[S]] : tensor<1x4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<1x8xf32>) -> tensor<1x4xf32> {
  %cst = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%arg0, %cst) <{window_dimensions = array<i64: 1, 4>, window_strides = array<i64: 1, 2>, padding = dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

// A product reducer does not commute with scaling: the input is unscaled (by its
// argument's scale, as it is), the reduce runs as in the original, the result has scale
// 1, and it is reported.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4x16xf32>, [[XS:%.*]]: tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[I:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4x16xf32>
// CHECK-NEXT:    [[U:%.*]] = stablehlo.multiply [[X]], [[XSB]] : tensor<4x16xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.reduce([[U]] init: [[I]]) applies stablehlo.multiply across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[R]], [[ONE]] : tensor<4xf32>, tensor<f32>

// WARN: warning: {{.*}}stablehlo.reduce has a reducer that does not commute with scaling; running it unscaled (scale 1)
// WARN-NOT: warning
func.func public @main(%arg0: tensor<4x16xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<1.0> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.multiply across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

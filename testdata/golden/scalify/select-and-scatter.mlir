// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Select-and-scatter family (the gradient of max pooling): the operand is only
// compared with itself, so it keeps its own scale; source and init are brought
// to a common scale, which the result carries.

// The 0 init is the same at every scale: nothing is rescaled, and the result
// has the source's scale g_s; the operand's scale x_s is not used.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<1x8xf32>, [[XS:%.*]]: tensor<f32>, [[G:%.*]]: tensor<1x4xf32>, [[GS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<1x8xf32>, tensor<f32>)
// CHECK-NEXT:    [[Z:%.*]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[R:%.*]] = "stablehlo.select_and_scatter"([[X]], [[G]], [[Z]]) <{window_dimensions = array<i64: 1, 2>, window_strides = array<i64: 1, 2>}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      [[GE:%.*]] = stablehlo.compare GE, [[A]], [[B]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:      stablehlo.return [[GE]] : tensor<i1>
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0([[C:%.*]]: tensor<f32>, [[D:%.*]]: tensor<f32>):
// CHECK-NEXT:      [[ADD:%.*]] = stablehlo.add [[C]], [[D]] : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[ADD]] : tensor<f32>
// CHECK-NEXT:    }) : (tensor<1x8xf32>, tensor<1x4xf32>, tensor<f32>) -> tensor<1x8xf32>
// CHECK-NEXT:    return [[R]], [[GS]] : tensor<1x8xf32>, tensor<f32>
func.func public @main(%arg0: tensor<1x8xf32>, %arg1: tensor<1x4xf32>) -> tensor<1x8xf32> {
  %cst = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.select_and_scatter"(%arg0, %arg1, %cst) <{window_dimensions = array<i64: 1, 2>, window_strides = array<i64: 1, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<1x8xf32>, tensor<1x4xf32>, tensor<f32>) -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

// A non-zero init (1.0) is brought to the source's scale: 1 / g_s.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<1x8xf32>, [[XS:%.*]]: tensor<f32>, [[G:%.*]]: tensor<1x4xf32>, [[GS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<1x8xf32>, tensor<f32>)
// CHECK-NEXT:    [[I:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[INV:%.*]] = stablehlo.divide [[ONE]], [[GS]] : tensor<f32>
// CHECK-NEXT:    [[I1:%.*]] = stablehlo.multiply [[I]], [[INV]] : tensor<f32>
// CHECK-NEXT:    [[R:%.*]] = "stablehlo.select_and_scatter"([[X]], [[G]], [[I1]])
// CHECK:         }) : (tensor<1x8xf32>, tensor<1x4xf32>, tensor<f32>) -> tensor<1x8xf32>
// CHECK-NEXT:    return [[R]], [[GS]] : tensor<1x8xf32>, tensor<f32>
func.func public @main(%arg0: tensor<1x8xf32>, %arg1: tensor<1x4xf32>) -> tensor<1x8xf32> {
  %cst = stablehlo.constant dense<1.0> : tensor<f32>
  %0 = "stablehlo.select_and_scatter"(%arg0, %arg1, %cst) <{window_dimensions = array<i64: 1, 2>, window_strides = array<i64: 1, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<1x8xf32>, tensor<1x4xf32>, tensor<f32>) -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

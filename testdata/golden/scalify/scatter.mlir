// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix WARN

// Scatter family: when the update region adds, takes max/min or overwrites,
// operand and updates are brought to a common scale (the operand's, with
// common-scale=first) and the result carries it; the integer indices are
// untouched. Any other update region runs unscaled and is reported.

// Scatter-add (the gradient of a gather).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<2x1xi32>, [[U:%.*]]: tensor<2xf32>, [[US:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]] = stablehlo.divide [[US]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[R]], dims = [] : (tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.multiply [[U]], [[RB]] : tensor<2xf32>
// CHECK-NEXT:    [[S:%.*]] = "stablehlo.scatter"([[X]], [[I]], [[U1]]) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      [[ADD:%.*]] = stablehlo.add [[A]], [[B]] : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[ADD]] : tensor<f32>
// CHECK-NEXT:    }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return [[S]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<2x1xi32>, %arg2: tensor<2xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Assignment (x.at[i].set(u)): the region returns the update as is.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<2x1xi32>, [[U:%.*]]: tensor<2xf32>, [[US:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]] = stablehlo.divide [[US]], [[XS]] : tensor<f32>
// CHECK-NEXT:    [[RB:%.*]] = stablehlo.broadcast_in_dim [[R]], dims = [] : (tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.multiply [[U]], [[RB]] : tensor<2xf32>
// CHECK-NEXT:    [[S:%.*]] = "stablehlo.scatter"([[X]], [[I]], [[U1]]) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
// CHECK-NEXT:    ^bb0({{%.*}}: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      stablehlo.return [[B]] : tensor<f32>
// CHECK-NEXT:    }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return [[S]], [[XS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<2x1xi32>, %arg2: tensor<2xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    stablehlo.return %b : tensor<f32>
  }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Scatter-multiply does not commute with a common scale: operand and updates
// are unscaled, the scatter runs as in the original, the result has scale 1,
// and the fallback is reported.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<2x1xi32>, [[U:%.*]]: tensor<2xf32>, [[US:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[XSB:%.*]] = stablehlo.broadcast_in_dim [[XS]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[XSB]] : tensor<4xf32>
// CHECK-NEXT:    [[USB:%.*]] = stablehlo.broadcast_in_dim [[US]], dims = [] : (tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.multiply [[U]], [[USB]] : tensor<2xf32>
// CHECK-NEXT:    [[S:%.*]] = "stablehlo.scatter"([[X1]], [[I]], [[U1]]) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      [[M:%.*]] = stablehlo.multiply [[A]], [[B]] : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[M]] : tensor<f32>
// CHECK-NEXT:    }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
// CHECK-NEXT:    [[ONE:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[S]], [[ONE]] : tensor<4xf32>, tensor<f32>

// WARN: warning: {{.*}}stablehlo.scatter has an update region that does not commute with scaling; running it unscaled (scale 1)
// WARN-NOT: warning
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<2x1xi32>, %arg2: tensor<2xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.multiply %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

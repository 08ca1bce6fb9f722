// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' | filecheck %s

// Barrier family (optimization_barrier): the data goes through the barrier,
// integers as they are; scales stay symbolic beside it (not barrier operands).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<4xi32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>, tensor<4xi32>)
// CHECK-NEXT:    [[B:%.*]]:2 = stablehlo.optimization_barrier [[X]], [[I]] : tensor<4xf32>, tensor<4xi32>
// CHECK-NEXT:    return [[B]]#0, [[XS]], [[B]]#1 : tensor<4xf32>, tensor<f32>, tensor<4xi32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %0:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<4xf32>, tensor<4xi32>
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xi32>
}

// -----

// A static scale stays static after the barrier: materialized only at the
// return.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    () -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.600000e+00> : tensor<4xf32>
// CHECK-NEXT:    [[B:%.*]] = stablehlo.optimization_barrier [[C]] : tensor<4xf32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.constant dense<6.250000e-02> : tensor<f32>
// CHECK-NEXT:    return [[B]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main() -> tensor<4xf32> {
  %cst = stablehlo.constant dense<0.1> : tensor<4xf32>
  %0 = stablehlo.optimization_barrier %cst : tensor<4xf32>
  return %0 : tensor<4xf32>
}

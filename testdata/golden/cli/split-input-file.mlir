// RUN: scalify-hlo rewrite %s --split-input-file --pipeline cse | filecheck %s
// Without --split-input-file the file is one module, where @f is defined twice:
// RUN: not scalify-hlo rewrite %s --pipeline cse 2>&1 | filecheck %s --check-prefix NOSPLIT

// Each `// -----` chunk is a module of its own, rewritten on its own, so two
// chunks may both define @f. The outputs come in input order, one `// -----`
// line between two outputs.

// CHECK-LABEL: func.func public @f
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[S:.*]] = stablehlo.sine %[[X]] : tensor<4xf32>
// CHECK-NEXT:    return %[[S]] : tensor<4xf32>
// CHECK:       // -----
func.func public @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sine %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func public @f
// CHECK-SAME:    (%[[X:.*]]: tensor<2xi32>) -> tensor<2xi32>
// CHECK-NEXT:    %[[N:.*]] = stablehlo.negate %[[X]] : tensor<2xi32>
// CHECK-NEXT:    return %[[N]] : tensor<2xi32>
// CHECK:       // -----
// NOSPLIT: error: {{(.*/)?}}split-input-file.mlir:[[# @LINE + 1]]:1: redefinition of symbol named 'f'
func.func public @f(%arg0: tensor<2xi32>) -> tensor<2xi32> {
  %0 = stablehlo.negate %arg0 : tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

// A chunk may also be a named module with attributes.

// CHECK-LABEL: module @named attributes {mhlo.num_partitions = 1 : i32}
// CHECK-NEXT:    func.func public @main
// CHECK-NOT:   // -----
module @named attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

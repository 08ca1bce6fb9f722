// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'inline,canonicalize,cse' \
// RUN:   | filecheck %s
// Empty option braces are valid MLIR pipeline syntax and change nothing:
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'inline{},canonicalize{},cse{}' \
// RUN:   | filecheck %s
// The pipeline runs the passes it names, in its order, and no others:
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline inline \
// RUN:   | filecheck %s --check-prefix INLINE
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'cse,inline' \
// RUN:   | filecheck %s --check-prefix INLINE

// Inlining one callee twice duplicates its body; cse then merges the copies.

// CHECK-LABEL: func.func public @inline_then_cse
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[S:.*]] = stablehlo.sine %[[X]] : tensor<4xf32>
// CHECK-NEXT:    %[[M:.*]] = stablehlo.multiply %[[S]], %[[S]] : tensor<4xf32>
// CHECK-NEXT:    %[[A:.*]] = stablehlo.add %[[M]], %[[M]] : tensor<4xf32>
// CHECK-NEXT:    return %[[A]] : tensor<4xf32>

// INLINE-LABEL: func.func public @inline_then_cse
// INLINE-COUNT-2: stablehlo.sine
// INLINE-NOT:     stablehlo.sine
// INLINE:         return
func.func public @inline_then_cse(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @square_sin(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = call @square_sin(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
func.func private @square_sin(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sine %arg0 : tensor<4xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// canonicalize erases an op whose result is unused.

// CHECK-LABEL: func.func public @dead_code
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[C:.*]] = stablehlo.cosine %[[X]] : tensor<4xf32>
// CHECK-NEXT:    return %[[C]] : tensor<4xf32>
func.func public @dead_code(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sine %arg0 : tensor<4xf32>
  %1 = stablehlo.cosine %arg0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Equal constants become one.

// CHECK-LABEL: func.func public @duplicate_constants
// CHECK-SAME:    (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[TWO:.*]] = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK-NEXT:    %[[M0:.*]] = stablehlo.multiply %[[X]], %[[TWO]] : tensor<4xf32>
// CHECK-NEXT:    %[[M1:.*]] = stablehlo.multiply %[[M0]], %[[TWO]] : tensor<4xf32>
// CHECK-NEXT:    return %[[M1]] : tensor<4xf32>
func.func public @duplicate_constants(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.constant dense<2.0> : tensor<4xf32>
  %1 = stablehlo.multiply %arg0, %0 : tensor<4xf32>
  %2 = stablehlo.constant dense<2.0> : tensor<4xf32>
  %3 = stablehlo.multiply %1, %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}

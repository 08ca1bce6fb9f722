// NOTE: this case depends on the `scalify` pass (in progress). It tests that a
// pass option list in braces, with several space-separated options, parses and
// runs; an integer-only function has nothing to scale, so it comes out as is.
// RUN: scalify-hlo rewrite %s --pipeline 'inline,scalify{data-dtype=f32 strict=true},cse' \
// RUN:   | filecheck %s

// CHECK-LABEL: func.func public @integers_only
// CHECK-SAME:    (%[[A:.*]]: tensor<4xi32>, %[[B:.*]]: tensor<4xi32>) -> tensor<4xi32>
// CHECK-NEXT:    %[[S:.*]] = stablehlo.add %[[A]], %[[B]] : tensor<4xi32>
// CHECK-NEXT:    return %[[S]] : tensor<4xi32>
func.func public @integers_only(%arg0: tensor<4xi32>, %arg1: tensor<4xi32>) -> tensor<4xi32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<4xi32>
  return %0 : tensor<4xi32>
}

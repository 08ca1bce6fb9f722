// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 common-scale=max}' \
// RUN:   | filecheck %s

// Select-and-scatter family (the gradient of max pooling): the operand is only
// compared with itself, so it keeps its own scale; source and init are brought
// to a common scale (the max of their i32 exponents), which the result carries.

// The 0 init is the same at every scale: nothing is rescaled, and the result
// has the source's scale g_s, returned as the argument itself; the operand's
// scale x_s is not used.

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

// A non-zero init (1.0, i32 exponent 0) and the source meet at the max of their
// exponents, m = max(g_e, 0) (g_e: the exponent of g_s, from its bits): the source
// is multiplied by 2^(g_e - m), the init by 2^-m, and the result carries m, returned
// as the f32 scale 2^clamp(m, -126, 127) with the excess multiplied into the data.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<1x8xf32>, [[XS:%.*]]: tensor<f32>, [[G:%.*]]: tensor<1x4xf32>, [[GS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<1x8xf32>, tensor<f32>)
// CHECK-NEXT:    [[I:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         stablehlo.bitcast_convert [[GS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[GE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[ZERO:%.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:    [[M:%.*]] = stablehlo.maximum [[GE]], [[ZERO]] : tensor<i32>
// CHECK-NEXT:    [[DG:%.*]] = stablehlo.subtract [[GE]], [[M]] : tensor<i32>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KG:%.*]] = stablehlo.clamp [[LO]], [[DG]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KGB:%.*]] = stablehlo.add [[KG]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[FGBITS:%.*]] = stablehlo.shift_left [[KGB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FG:%.*]] = stablehlo.bitcast_convert [[FGBITS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FGB:%.*]] = stablehlo.broadcast_in_dim [[FG]], dims = [] : (tensor<f32>) -> tensor<1x4xf32>
// CHECK-NEXT:    [[G1:%.*]] = stablehlo.multiply [[G]], [[FGB]] : tensor<1x4xf32>
// CHECK-NEXT:    [[NM:%.*]] = stablehlo.negate [[M]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.clamp {{%.*}}, [[NM]], {{%.*}} : tensor<i32>
// CHECK:         [[FI:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[I1:%.*]] = stablehlo.multiply [[I]], [[FI]] : tensor<f32>
// CHECK-NEXT:    [[R:%.*]] = "stablehlo.select_and_scatter"([[X]], [[G1]], [[I1]])
// CHECK:         }) : (tensor<1x8xf32>, tensor<1x4xf32>, tensor<f32>) -> tensor<1x8xf32>
// CHECK-NEXT:    {{%.*}} = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[MH:%.*]] = stablehlo.clamp {{%.*}}, [[M]], {{%.*}} : tensor<i32>
// CHECK-NEXT:    [[EXCESS:%.*]] = stablehlo.subtract [[M]], [[MH]] : tensor<i32>
// CHECK-NEXT:    {{%.*}} = stablehlo.clamp {{%.*}}, [[EXCESS]], {{%.*}} : tensor<i32>
// CHECK:         [[R1:%.*]] = stablehlo.multiply [[R]], {{%.*}} : tensor<1x8xf32>
// CHECK:         [[S:%.*]] = stablehlo.bitcast_convert {{%.*}} : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R1]], [[S]] : tensor<1x8xf32>, tensor<f32>
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

// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 common-scale=max}' \
// RUN:   | filecheck %s
// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32}' 2>&1 >/dev/null \
// RUN:   | filecheck %s --check-prefix WARN

// Scatter family: when the update region adds, takes max/min or overwrites,
// operand and updates are brought to a common scale (here the maximum of
// their i32 exponents, common-scale=max; an overwrite, a merge op, takes their
// midpoint) and the result carries it; the integer indices are untouched. Any
// other update region runs unscaled and is reported.

// Scatter-add (the gradient of a gather). The f32 argument scales are turned
// into i32 exponents (bits >> 23, minus 127); the common exponent E is their
// maximum, and each data is multiplied by 2^(e - E) <= 1, a factor built from
// bits (clamp to [-127, 127], + 127, << 23, bitcast). At the return, the f32
// scale is 2^clamp(E, -126, 127) and the data is multiplied by the excess
// 2^(E - that).

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<2x1xi32>, [[U:%.*]]: tensor<2xf32>, [[US:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[US]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[UE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.maximum [[XE]], [[UE]] : tensor<i32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[XE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[DXC:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXB:%.*]] = stablehlo.add [[DXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXI:%.*]] = stablehlo.shift_left [[DXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DXF:%.*]] = stablehlo.bitcast_convert [[DXI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DXFB:%.*]] = stablehlo.broadcast_in_dim [[DXF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[DXFB]] : tensor<4xf32>
// CHECK-NEXT:    [[DU:%.*]] = stablehlo.subtract [[UE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[DUC:%.*]] = stablehlo.clamp [[CM127]], [[DU]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DUB:%.*]] = stablehlo.add [[DUC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DUI:%.*]] = stablehlo.shift_left [[DUB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DUF:%.*]] = stablehlo.bitcast_convert [[DUI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DUFB:%.*]] = stablehlo.broadcast_in_dim [[DUF]], dims = [] : (tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.multiply [[U]], [[DUFB]] : tensor<2xf32>
// CHECK-NEXT:    [[S:%.*]] = "stablehlo.scatter"([[X1]], [[I]], [[U1]]) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
// CHECK-NEXT:    ^bb0([[A:%.*]]: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      [[ADD:%.*]] = stablehlo.add [[A]], [[B]] : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[ADD]] : tensor<f32>
// CHECK-NEXT:    }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.subtract [[E]], [[HI]] : tensor<i32>
// CHECK-NEXT:    [[LOC:%.*]] = stablehlo.clamp [[CM127]], [[LO]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOB:%.*]] = stablehlo.add [[LOC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOI:%.*]] = stablehlo.shift_left [[LOB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[LOF:%.*]] = stablehlo.bitcast_convert [[LOI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[LOFB:%.*]] = stablehlo.broadcast_in_dim [[LOF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[SD:%.*]] = stablehlo.multiply [[S]], [[LOFB]] : tensor<4xf32>
// CHECK-NEXT:    [[HIB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[HII:%.*]] = stablehlo.shift_left [[HIB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[SS:%.*]] = stablehlo.bitcast_convert [[HII]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[SD]], [[SS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<2x1xi32>, %arg2: tensor<2xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Assignment (x.at[i].set(u)): the region returns the update as is, so the
// scatter puts pieces of its operands side by side, a merge op as
// dynamic_update_slice is: with f32 data its common scale is the midpoint of
// the two exponents (no higher than 100 below the larger), which holds both up
// to 2^252 apart.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>, [[I:%.*]]: tensor<2x1xi32>, [[U:%.*]]: tensor<2xf32>, [[US:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[XE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[US]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[UE:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[SUM:%.*]] = stablehlo.add [[XE]], [[UE]] : tensor<i32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[MID:%.*]] = stablehlo.shift_right_arithmetic [[SUM]], [[C1]] : tensor<i32>
// CHECK-NEXT:    [[TOP:%.*]] = stablehlo.maximum [[XE]], [[UE]] : tensor<i32>
// CHECK-NEXT:    [[C100:%.*]] = stablehlo.constant dense<100> : tensor<i32>
// CHECK-NEXT:    [[REACH:%.*]] = stablehlo.subtract [[TOP]], [[C100]] : tensor<i32>
// CHECK-NEXT:    [[E:%.*]] = stablehlo.maximum [[MID]], [[REACH]] : tensor<i32>
// CHECK-NEXT:    [[DX:%.*]] = stablehlo.subtract [[XE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[DXC:%.*]] = stablehlo.clamp [[CM127]], [[DX]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXB:%.*]] = stablehlo.add [[DXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DXI:%.*]] = stablehlo.shift_left [[DXB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DXF:%.*]] = stablehlo.bitcast_convert [[DXI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DXFB:%.*]] = stablehlo.broadcast_in_dim [[DXF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[X1:%.*]] = stablehlo.multiply [[X]], [[DXFB]] : tensor<4xf32>
// CHECK-NEXT:    [[DU:%.*]] = stablehlo.subtract [[UE]], [[E]] : tensor<i32>
// CHECK-NEXT:    [[DUC:%.*]] = stablehlo.clamp [[CM127]], [[DU]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DUB:%.*]] = stablehlo.add [[DUC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[DUI:%.*]] = stablehlo.shift_left [[DUB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[DUF:%.*]] = stablehlo.bitcast_convert [[DUI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[DUFB:%.*]] = stablehlo.broadcast_in_dim [[DUF]], dims = [] : (tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    [[U1:%.*]] = stablehlo.multiply [[U]], [[DUFB]] : tensor<2xf32>
// CHECK-NEXT:    [[S:%.*]] = "stablehlo.scatter"([[X1]], [[I]], [[U1]]) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
// CHECK-NEXT:    ^bb0({{%.*}}: tensor<f32>, [[B:%.*]]: tensor<f32>):
// CHECK-NEXT:      stablehlo.return [[B]] : tensor<f32>
// CHECK-NEXT:    }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[E]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LO:%.*]] = stablehlo.subtract [[E]], [[HI]] : tensor<i32>
// CHECK-NEXT:    [[LOC:%.*]] = stablehlo.clamp [[CM127]], [[LO]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOB:%.*]] = stablehlo.add [[LOC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[LOI:%.*]] = stablehlo.shift_left [[LOB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[LOF:%.*]] = stablehlo.bitcast_convert [[LOI]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[LOFB:%.*]] = stablehlo.broadcast_in_dim [[LOF]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[SD:%.*]] = stablehlo.multiply [[S]], [[LOFB]] : tensor<4xf32>
// CHECK-NEXT:    [[HIB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[HII:%.*]] = stablehlo.shift_left [[HIB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[SS:%.*]] = stablehlo.bitcast_convert [[HII]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[SD]], [[SS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<2x1xi32>, %arg2: tensor<2xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.scatter"(%arg0, %arg1, %arg2) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    stablehlo.return %b : tensor<f32>
  }) : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Scatter-multiply does not commute with a common scale: operand and updates
// are unscaled (each data multiplied by its argument's scale, as it is), the
// scatter runs as in the original, the result has scale 1, and the fallback is
// reported.

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
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    return [[S]], [[C1]] : tensor<4xf32>, tensor<f32>

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

// RUN: scalify-hlo rewrite %s --split-input-file --pipeline 'scalify{data-dtype=f32 common-scale=max}' \
// RUN:   | filecheck %s

// Control-flow family (while, case, if): (data, exponent) pairs are carried
// through block arguments, yields and results, the exponent an i32 scalar. An
// f32 scale argument s is converted to its exponent e = (bits(s) >> 23) - 127
// where first needed. At the function result, a carried exponent e becomes the
// f32 scale 2^clamp(e, -126, 127) and the data is multiplied by the excess
// 2^clamp(e - clamp(e, -126, 127), -127, 127), each factor built from bits,
// bitcast((k + 127) << 23).

// while carrying a float and an i32 counter: the float becomes two carried
// values (data, i32 exponent) next to the counter; the body squares the data
// and doubles the carried exponent.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[C0:%.*]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:    [[C1:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:    [[C3:%.*]] = stablehlo.constant dense<3> : tensor<i32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[W:%.*]]:3 = stablehlo.while([[D:%.*]] = [[X]], [[E:%.*]] = [[EX]], [[N:%.*]] = [[C0]]) : tensor<4xf32>, tensor<i32>, tensor<i32>
// CHECK-NEXT:    cond {
// CHECK-NEXT:      [[LT:%.*]] = stablehlo.compare LT, [[N]], [[C3]], SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:      stablehlo.return [[LT]] : tensor<i1>
// CHECK-NEXT:    } do {
// CHECK-NEXT:      [[D2:%.*]] = stablehlo.multiply [[D]], [[D]] : tensor<4xf32>
// CHECK-NEXT:      [[N1:%.*]] = stablehlo.add [[N]], [[C1]] : tensor<i32>
// CHECK-NEXT:      [[TWO:%.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT:      [[E2:%.*]] = stablehlo.multiply [[E]], [[TWO]] : tensor<i32>
// CHECK-NEXT:      stablehlo.return [[D2]], [[E2]], [[N1]] : tensor<4xf32>, tensor<i32>, tensor<i32>
// CHECK-NEXT:    }
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[W]]#1, [[C127]] : tensor<i32>
// CHECK-NEXT:    [[EXC:%.*]] = stablehlo.subtract [[W]]#1, [[HI]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KL:%.*]] = stablehlo.clamp [[CM127]], [[EXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLB:%.*]] = stablehlo.add [[KL]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLS:%.*]] = stablehlo.shift_left [[KLB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FL:%.*]] = stablehlo.bitcast_convert [[KLS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FLB:%.*]] = stablehlo.broadcast_in_dim [[FL]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.multiply [[W]]#0, [[FLB]] : tensor<4xf32>
// CHECK-NEXT:    [[KSB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KSS:%.*]] = stablehlo.shift_left [[KSB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.bitcast_convert [[KSS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c0) : tensor<4xf32>, tensor<i32>
  cond {
    %1 = stablehlo.compare LT, %iterArg_0, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.multiply %iterArg, %iterArg : tensor<4xf32>
    %2 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
    stablehlo.return %1, %2 : tensor<4xf32>, tensor<i32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

// A float loop condition: x < 100 compares the carried data with the constant
// (1.5625 at the static exponent 6), both brought to the midpoint exponent
// m = (e + 6) >> 1 in the cond region itself (a compare merges, see compare.mlir):
// the data is multiplied by 2^(e - m) and the constant by 2^(6 - m). The body
// adds the constant at m = max(e, 6) the same way and yields the sum with m.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[X:%.*]]: tensor<f32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<f32>, tensor<f32>)
// CHECK-NEXT:    [[C:%.*]] = stablehlo.constant dense<1.562500e+00> : tensor<f32>
// CHECK:         stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:         [[OC23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:         [[OC127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:         [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:    [[W:%.*]]:2 = stablehlo.while([[D:%.*]] = [[X]], [[E:%.*]] = [[EX]]) : tensor<f32>, tensor<i32>
// CHECK-NEXT:    cond {
// CHECK-NEXT:      [[E6:%.*]] = stablehlo.constant dense<6> : tensor<i32>
// CHECK-NEXT:      [[SUM:%.*]] = stablehlo.add [[E]], [[E6]] : tensor<i32>
// CHECK-NEXT:      [[ONE:%.*]] = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:      [[MID:%.*]] = stablehlo.shift_right_arithmetic [[SUM]], [[ONE]] : tensor<i32>
// CHECK-NEXT:      [[TOP:%.*]] = stablehlo.maximum [[E]], [[E6]] : tensor<i32>
// CHECK-NEXT:      [[REACH:%.*]] = stablehlo.constant dense<100> : tensor<i32>
// CHECK-NEXT:      [[LOW:%.*]] = stablehlo.subtract [[TOP]], [[REACH]] : tensor<i32>
// CHECK-NEXT:      [[M:%.*]] = stablehlo.maximum [[MID]], [[LOW]] : tensor<i32>
// CHECK-NEXT:      [[DD:%.*]] = stablehlo.subtract [[E]], [[M]] : tensor<i32>
// CHECK-NEXT:      [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:      [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK-NEXT:      [[KD:%.*]] = stablehlo.clamp [[CM127]], [[DD]], [[C127]] : tensor<i32>
// CHECK-NEXT:      [[KDB:%.*]] = stablehlo.add [[KD]], [[C127]] : tensor<i32>
// CHECK-NEXT:      [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK-NEXT:      [[KDS:%.*]] = stablehlo.shift_left [[KDB]], [[C23]] : tensor<i32>
// CHECK-NEXT:      [[FD:%.*]] = stablehlo.bitcast_convert [[KDS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:      [[D1:%.*]] = stablehlo.multiply [[D]], [[FD]] : tensor<f32>
// CHECK-NEXT:      [[DC:%.*]] = stablehlo.subtract [[E6]], [[M]] : tensor<i32>
// CHECK-NEXT:      [[KC:%.*]] = stablehlo.clamp [[CM127]], [[DC]], [[C127]] : tensor<i32>
// CHECK-NEXT:      [[KCB:%.*]] = stablehlo.add [[KC]], [[C127]] : tensor<i32>
// CHECK-NEXT:      [[KCS:%.*]] = stablehlo.shift_left [[KCB]], [[C23]] : tensor<i32>
// CHECK-NEXT:      [[FC:%.*]] = stablehlo.bitcast_convert [[KCS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:      [[C1:%.*]] = stablehlo.multiply [[C]], [[FC]] : tensor<f32>
// CHECK-NEXT:      [[LT:%.*]] = stablehlo.compare LT, [[D1]], [[C1]], FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:      stablehlo.return [[LT]] : tensor<i1>
// CHECK-NEXT:    } do {
// CHECK-NEXT:      [[E6:%.*]] = stablehlo.constant dense<6> : tensor<i32>
// CHECK-NEXT:      [[M:%.*]] = stablehlo.maximum [[E]], [[E6]] : tensor<i32>
// CHECK-NEXT:      [[DD:%.*]] = stablehlo.subtract [[E]], [[M]] : tensor<i32>
// CHECK-NEXT:      [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:      [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK-NEXT:      [[KD:%.*]] = stablehlo.clamp [[CM127]], [[DD]], [[C127]] : tensor<i32>
// CHECK-NEXT:      [[KDB:%.*]] = stablehlo.add [[KD]], [[C127]] : tensor<i32>
// CHECK-NEXT:      [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK-NEXT:      [[KDS:%.*]] = stablehlo.shift_left [[KDB]], [[C23]] : tensor<i32>
// CHECK-NEXT:      [[FD:%.*]] = stablehlo.bitcast_convert [[KDS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:      [[D1:%.*]] = stablehlo.multiply [[D]], [[FD]] : tensor<f32>
// CHECK-NEXT:      [[DC:%.*]] = stablehlo.subtract [[E6]], [[M]] : tensor<i32>
// CHECK-NEXT:      [[KC:%.*]] = stablehlo.clamp [[CM127]], [[DC]], [[C127]] : tensor<i32>
// CHECK-NEXT:      [[KCB:%.*]] = stablehlo.add [[KC]], [[C127]] : tensor<i32>
// CHECK-NEXT:      [[KCS:%.*]] = stablehlo.shift_left [[KCB]], [[C23]] : tensor<i32>
// CHECK-NEXT:      [[FC:%.*]] = stablehlo.bitcast_convert [[KCS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:      [[C1:%.*]] = stablehlo.multiply [[C]], [[FC]] : tensor<f32>
// CHECK-NEXT:      [[A:%.*]] = stablehlo.add [[D1]], [[C1]] : tensor<f32>
// CHECK-NEXT:      stablehlo.return [[A]], [[M]] : tensor<f32>, tensor<i32>
// CHECK-NEXT:    }
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[W]]#1, [[OC127]] : tensor<i32>
// CHECK-NEXT:    [[EXC:%.*]] = stablehlo.subtract [[W]]#1, [[HI]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KL:%.*]] = stablehlo.clamp [[CM127]], [[EXC]], [[OC127]] : tensor<i32>
// CHECK-NEXT:    [[KLB:%.*]] = stablehlo.add [[KL]], [[OC127]] : tensor<i32>
// CHECK-NEXT:    [[KLS:%.*]] = stablehlo.shift_left [[KLB]], [[OC23]] : tensor<i32>
// CHECK-NEXT:    [[FL:%.*]] = stablehlo.bitcast_convert [[KLS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[R:%.*]] = stablehlo.multiply [[W]]#0, [[FL]] : tensor<f32>
// CHECK-NEXT:    [[KSB:%.*]] = stablehlo.add [[HI]], [[OC127]] : tensor<i32>
// CHECK-NEXT:    [[KSS:%.*]] = stablehlo.shift_left [[KSB]], [[OC23]] : tensor<i32>
// CHECK-NEXT:    [[S:%.*]] = stablehlo.bitcast_convert [[KSS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[R]], [[S]] : tensor<f32>, tensor<f32>
func.func public @main(%arg0: tensor<f32>) -> tensor<f32> {
  %cst = stablehlo.constant dense<100.0> : tensor<f32>
  %0 = stablehlo.while(%iterArg = %arg0) : tensor<f32>
  cond {
    %1 = stablehlo.compare LT, %iterArg, %cst, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.add %iterArg, %cst : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }
  return %0 : tensor<f32>
}

// -----

// case with two branches: each returns a (data, i32 exponent) pair, one the
// exponent of its argument's scale (converted inside the branch), the other
// the static exponent -4 of its constant, materialized inside the branch.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[I:%.*]]: tensor<i32>, [[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[R:%.*]]:2 = "stablehlo.case"([[I]]) ({
// CHECK-NEXT:      [[N:%.*]] = stablehlo.negate [[X]] : tensor<4xf32>
// CHECK:           stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:           [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:           [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:           [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:      stablehlo.return [[N]], [[EX]] : tensor<4xf32>, tensor<i32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      [[C:%.*]] = stablehlo.constant dense<1.600000e+00> : tensor<4xf32>
// CHECK-NEXT:      [[EC:%.*]] = stablehlo.constant dense<-4> : tensor<i32>
// CHECK-NEXT:      stablehlo.return [[C]], [[EC]] : tensor<4xf32>, tensor<i32>
// CHECK-NEXT:    }) : (tensor<i32>) -> (tensor<4xf32>, tensor<i32>)
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[R]]#1, [[C127]] : tensor<i32>
// CHECK-NEXT:    [[EXC:%.*]] = stablehlo.subtract [[R]]#1, [[HI]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KL:%.*]] = stablehlo.clamp [[CM127]], [[EXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLB:%.*]] = stablehlo.add [[KL]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK-NEXT:    [[KLS:%.*]] = stablehlo.shift_left [[KLB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FL:%.*]] = stablehlo.bitcast_convert [[KLS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FLB:%.*]] = stablehlo.broadcast_in_dim [[FL]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.multiply [[R]]#0, [[FLB]] : tensor<4xf32>
// CHECK-NEXT:    [[KSB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KSS:%.*]] = stablehlo.shift_left [[KSB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FS:%.*]] = stablehlo.bitcast_convert [[KSS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[D]], [[FS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%arg0: tensor<i32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.case"(%arg0) ({
    %1 = stablehlo.negate %arg1 : tensor<4xf32>
    stablehlo.return %1 : tensor<4xf32>
  }, {
    %cst = stablehlo.constant dense<0.1> : tensor<4xf32>
    stablehlo.return %cst : tensor<4xf32>
  }) : (tensor<i32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// stablehlo.if: branches capture %x from outside and yield (data, i32 exponent)
// pairs; each branch converts x's scale to its exponent itself.

// CHECK-LABEL: func.func public @main
// CHECK-SAME:    ([[P:%.*]]: tensor<i1>, [[X:%.*]]: tensor<4xf32>, [[XS:%.*]]: tensor<f32>)
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    [[IF:%.*]]:2 = "stablehlo.if"([[P]]) ({
// CHECK-NEXT:      [[NEG:%.*]] = stablehlo.negate [[X]] : tensor<4xf32>
// CHECK:           stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:           [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:           [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:           [[EX:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:      stablehlo.return [[NEG]], [[EX]] : tensor<4xf32>, tensor<i32>
// CHECK-NEXT:    }, {
// CHECK:           stablehlo.bitcast_convert [[XS]] : (tensor<f32>) -> tensor<i32>
// CHECK:           [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK:           [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK:           [[EX2:%.*]] = stablehlo.subtract {{.*}} : tensor<i32>
// CHECK-NEXT:      stablehlo.return [[X]], [[EX2]] : tensor<4xf32>, tensor<i32>
// CHECK-NEXT:    }) : (tensor<i1>) -> (tensor<4xf32>, tensor<i32>)
// CHECK-NEXT:    [[CM126:%.*]] = stablehlo.constant dense<-126> : tensor<i32>
// CHECK-NEXT:    [[C127:%.*]] = stablehlo.constant dense<127> : tensor<i32>
// CHECK-NEXT:    [[HI:%.*]] = stablehlo.clamp [[CM126]], [[IF]]#1, [[C127]] : tensor<i32>
// CHECK-NEXT:    [[EXC:%.*]] = stablehlo.subtract [[IF]]#1, [[HI]] : tensor<i32>
// CHECK-NEXT:    [[CM127:%.*]] = stablehlo.constant dense<-127> : tensor<i32>
// CHECK-NEXT:    [[KL:%.*]] = stablehlo.clamp [[CM127]], [[EXC]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KLB:%.*]] = stablehlo.add [[KL]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[C23:%.*]] = stablehlo.constant dense<23> : tensor<i32>
// CHECK-NEXT:    [[KLS:%.*]] = stablehlo.shift_left [[KLB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FL:%.*]] = stablehlo.bitcast_convert [[KLS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    [[FLB:%.*]] = stablehlo.broadcast_in_dim [[FL]], dims = [] : (tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    [[D:%.*]] = stablehlo.multiply [[IF]]#0, [[FLB]] : tensor<4xf32>
// CHECK-NEXT:    [[KSB:%.*]] = stablehlo.add [[HI]], [[C127]] : tensor<i32>
// CHECK-NEXT:    [[KSS:%.*]] = stablehlo.shift_left [[KSB]], [[C23]] : tensor<i32>
// CHECK-NEXT:    [[FS:%.*]] = stablehlo.bitcast_convert [[KSS]] : (tensor<i32>) -> tensor<f32>
// CHECK-NEXT:    return [[D]], [[FS]] : tensor<4xf32>, tensor<f32>
func.func public @main(%p: tensor<i1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.if"(%p) ({
    %1 = stablehlo.negate %x : tensor<4xf32>
    stablehlo.return %1 : tensor<4xf32>
  }, {
    stablehlo.return %x : tensor<4xf32>
  }) : (tensor<i1>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A zero-filled carry (a scan's stacked outputs) enters with the unset exponent
// -2^24. dynamic_update_slice merges at the midpoint of the exponents here (f32
// data, common-scale=max); the midpoint with an unset exponent is the other
// operand's, so the minimum is taken with the unset exponent replaced by the
// maximum (an exponent below -2^23 reads as unset). Without it the midpoint,
// about -2^23, would put the update at 2^(2^23): inf.

// CHECK-LABEL: func.func public @main
// CHECK:         [[U:%.*]] = stablehlo.constant dense<-16777216> : tensor<i32>
// CHECK-NEXT:    stablehlo.while({{%.*}} = {{%.*}}, [[BE:%.*]] = [[U]], {{%.*}} = {{%.*}})
// CHECK:         } do {
// CHECK:           [[XE:%.*]] = stablehlo.subtract {{%.*}}, {{%.*}} : tensor<i32>
// CHECK-NEXT:      [[MAX:%.*]] = stablehlo.maximum [[BE]], [[XE]] : tensor<i32>
// CHECK-NEXT:      [[LIM:%.*]] = stablehlo.constant dense<-8388608> : tensor<i32>
// CHECK-NEXT:      [[UNSET:%.*]] = stablehlo.compare LT, [[BE]], [[LIM]], SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:      [[SET:%.*]] = stablehlo.select [[UNSET]], [[MAX]], [[BE]] : tensor<i1>, tensor<i32>
// CHECK-NEXT:      [[MIN:%.*]] = stablehlo.minimum [[SET]], [[XE]] : tensor<i32>
// CHECK-NEXT:      [[SUM:%.*]] = stablehlo.add [[MAX]], [[MIN]] : tensor<i32>
// CHECK-NEXT:      {{%.*}} = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:      [[HALF:%.*]] = stablehlo.shift_right_arithmetic [[SUM]], {{%.*}} : tensor<i32>
// CHECK:           [[MID:%.*]] = stablehlo.maximum [[HALF]], {{%.*}} : tensor<i32>
// CHECK:           stablehlo.dynamic_update_slice
// CHECK:           stablehlo.return {{%.*}}, [[MID]], {{%.*}}
func.func public @main(%arg0: tensor<4xf32>) -> tensor<3x4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %zeros = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x4xf32>
  %0:2 = stablehlo.while(%iterArg = %zeros, %iterArg_0 = %c0) : tensor<3x4xf32>, tensor<i32>
  cond {
    %1 = stablehlo.compare LT, %iterArg_0, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.reshape %arg0 : (tensor<4xf32>) -> tensor<1x4xf32>
    %2 = stablehlo.dynamic_update_slice %iterArg, %1, %iterArg_0, %c0 : (tensor<3x4xf32>, tensor<1x4xf32>, tensor<i32>, tensor<i32>) -> tensor<3x4xf32>
    %3 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
    stablehlo.return %2, %3 : tensor<3x4xf32>, tensor<i32>
  }
  return %0#0 : tensor<3x4xf32>
}

module usched/bench/peers/goserve

go 1.19

# The web search workload: Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010, Fig. 4
# (flows of a production web search cluster), as pFabric tabulated it in 1460-byte packets
# (Alizadeh et al., "pFabric: Minimal Near-Optimal Datacenter Transport", SIGCOMM 2013, §5),
# here in bytes (packets x 1460). Mean 1.7 MB.
# bytes cumulative-probability
8760 0
8760 0.15
18980 0.2
27740 0.3
48180 0.4
77380 0.53
194180 0.6
973820 0.7
1946180 0.8
4866180 0.9
9733820 0.97
29200000 1

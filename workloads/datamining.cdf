# The data-mining workload: Greenberg et al., "VL2: A Scalable and Flexible Data Center Network",
# SIGCOMM 2009, Fig. 2 (flow sizes in a data-mining cluster), as pFabric tabulated it in
# 1460-byte packets (Alizadeh et al., "pFabric", SIGCOMM 2013, §5), here in bytes
# (packets x 1460). Half the flows are one packet; the largest 1 GB; mean 7.4 MB.
# bytes cumulative-probability
1460 0
1460 0.5
2920 0.6
4380 0.7
10220 0.8
389820 0.9
3076220 0.95
97333820 0.99
973333820 1

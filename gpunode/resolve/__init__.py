"""Version specs made exact for each host, between its facts and its plan.

`specs` says what "550", "9.10" or "2.26.2-1+cuda12.8" admit; `resolver` picks, per host,
the installed version that satisfies a spec or else the newest the repository offers;
`packages` is the one version policy of every package. No names are re-exported here:
`index` is read at start-up without the resolver and the compatibility rules behind it.
"""

import numpy as np, jax, jax.scipy.special as J
from kiln.scipy import special as K
import warnings; warnings.simplefilter("ignore")
E=np.array([0.,-0., 1., -1., 0.5, 2., np.inf, -np.inf, np.nan], np.float32)
A,B=np.meshgrid(E,E)
for n in "gammainc gammaincc zeta polygamma expn betaln beta comb poch boxcox".split():
    a=A.astype(np.int32) if n=="polygamma" else A
    a=np.where(np.isfinite(A),A,0).astype(np.int32) if n=="polygamma" else A
    j=np.asarray(getattr(J,n)(a,B)); k=np.asarray(getattr(K,n)(a,B))
    bad=~np.isclose(j,k,equal_nan=True, rtol=1e-5)
    print(n, [(a,b,jj,kk) for a,b,jj,kk in zip(a[bad],B[bad],j[bad],k[bad])][:8])
for n in "exp1 expi i0e i1e i0 i1 erfcx dawsn factorial".split():
    j=np.asarray(getattr(J,n)(E)); k=np.asarray(getattr(K,n)(E))
    bad=~np.isclose(j,k,equal_nan=True, rtol=1e-5)
    print(n, list(zip(E[bad],j[bad],k[bad])))
C=np.array(np.meshgrid(E,E,E)).reshape(3,-1)
j=np.asarray(J.betainc(*C)); k=np.asarray(K.betainc(*C)); bad=~np.isclose(j,k,equal_nan=True, rtol=1e-5)
print("betainc", list(zip(C[0][bad],C[1][bad],C[2][bad],j[bad],k[bad]))[:10], bad.sum())

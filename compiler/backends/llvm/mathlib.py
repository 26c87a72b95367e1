"""Vectorisable transcendental functions for the LLVM backend, emitted as LLVM IR.

    emit(builder, name, args, ty) -> ir.Value      name in NAMES; ty float or double (scalar)

Role in the pipeline: the scalar lowerings of elementwise primitives (the `LLVM_SCALAR` table)
call `emit` inside fused loops. Each (function, type) becomes one `internal alwaysinline`
function in the builder's module, created on first use and named `kiln.math.<name>.f32|f64`.
Its body is straight-line code: arithmetic, selects, bit manipulation and intrinsics that have
vector forms (llvm.fma, fmuladd, fabs, floor, rint, copysign, sqrt, minnum, maxnum); no branch,
no call into the C library. After inlining, the loop vectoriser turns a loop over them into
full-width SIMD code.

Special values follow NumPy and SciPy (NaN propagation, infinities, overflow to inf, gradual
underflow, signed zeros, pow's C99 rules); docs/llvm_math.md lists the algorithms and the
accuracy measured for each function. float32 variants run the same algorithm in float (exp,
expm1, log, log1p, tanh, logistic, erf, erf_inv, sqrt, rsqrt) or compute in double and round
once (the rest: half the vector width, but correctly rounded in all but a few cases).

Polynomial coefficients are minimax fits (Remez exchange in 50-digit arithmetic, leading
coefficients rounded first and the rest refitted); the constants below are their values
rounded to the working type.
"""
import functools
from fractions import Fraction

from llvmlite import ir

F64 = ir.DoubleType()

# ----------------------------------------------------------------------------- constants

# (hi, lo) pairs: hi + lo is the constant to about 2^-106. Splits whose hi part has trailing
# zero bits (so that n * hi is exact for the integers n the reductions use) say how many bits.
LN2 = (0.6931471805599453, 2.3190468138462996e-17)
LN2_42 = (0.6931471805598903, 5.497923018708371e-14)        # hi: 42 bits, n * hi exact, |n| < 2^11
LN2_16F = (0.693145751953125, 1.428606765330187e-06)         # float: 16 bits, |n| < 2^8
LOG2E = 1.4426950408889634
PIO2 = (1.5707963267948966, 6.123233995736766e-17)
PIO4 = (0.7853981633974483, 3.061616997868383e-17)
PI = (3.141592653589793, 1.2246467991473532e-16)
TWO_OVER_PI = 0.6366197723675814
PIO2_33 = (1.5707963267341256, 6.077100506303966e-11, 2.0222662487959506e-21)   # 33 + 33 bits
PIO2_28 = (1.570796325802803, 9.920935808982456e-10, -1.2177051777973966e-18)   # 28 + 28 bits
TWO_OVER_SQRTPI = 1.1283791670955126
CBRT2, CBRT4 = 1.2599210498948732, 1.5874010519681994
STIRLING_C = 0.4189385332046727             # log(2 pi) / 2 - 1/2
EULER = 0.5772156649015329
DIGAMMA_ROOT = (1.4616321449683622, 9.549995429965697e-17)
LOG_J8 = ((-0.2876820724517809, -2.607160616442564e-17),     # log(j / 8), j = 6 .. 11
          (-0.13353139262452263, 3.664457663660085e-18),
          (0.0, 0.0),
          (0.11778303565638346, -1.1971685747593677e-18),
          (0.22314355131420976, -9.091270597324799e-18),
          (0.3184537311185346, 2.7114779367326236e-17))
# floor(2/pi * 2^1200), for the large-argument reduction tables (_payne_hanek)
TWO_OVER_PI_1200 = int(
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2e00649"
    "2eea09d1921cfe1deb1cb129a73ee88235f52ebb4484e99c7026b45f7e413991d639835339f49c845f8b"
    "bdf9283b1ff897ffde05980fef2f118b5a0a6d1f6d367ecf27cb09b74f463f669e5fea2d7527bac7ebe5"
    "f17b3d0739f78a5292ea6bfb5fb11f8d5d0856033046fc7b", 16)
ERFC_SEGMENTS = (0.5, 1.0, 2.0, 4.0, 8.0, 14.0, 28.0)   # erfc(x) = e^(-x^2) K(x), K per segment

# Polynomial coefficients, lowest degree first, keyed "<name>.<d|f|fd>" (see _Code.coef).
_COEFFS = {
    "exp_h.d": (0.5, 0.16666666666666688, 0.041666666666666824, 0.00833333333331389,
        0.0013888888888777796, 0.00019841269903384876, 2.480158755982561e-05,
        2.7557228654878986e-06, 2.755706697423876e-07, 2.5113945675415147e-08,
        2.097802532448842e-09),
    "exp_h.f": (0.4999999403953552, 0.16666516661643982, 0.04166810214519501,
        0.008369192481040955, 0.0013838894665241241),
    "log_p.d": (0.6666666666666666, 0.40000000000004926, 0.28571428569409774,
        0.22222222607239447, 0.1818177832986358, 0.1538699008345743, 0.13252118514928343,
        0.13235057016312096),
    "log_p.f": (0.6666677594184875, 0.39977580308914185, 0.29870927333831787),
    "pow_log.d": (0.6666666666666667, 0.399999999999403, 0.28571428723811837,
        0.22222054272720124, 0.18265365737791392),
    "tanh_t.d": (-0.33333333333333326, 0.13333333333331865, -0.05396825396725824,
        0.02186948850253256, -0.008863234866024566, 0.003592119686940309, -0.0014557641715070729,
        0.0005896223828128589, -0.0002375127719192412, 9.24890491402307e-05,
        -3.117792467614265e-05, 6.502993999178816e-06),
    "tanh_t.f": (-0.33333298563957214, 0.13331936299800873, -0.05378471687436104,
        0.02079862542450428, -0.0058979676105082035),
    "sinh_s.d": (0.16666666666666669, 0.008333333333332912, 0.00019841269841593408,
        2.7557319106758405e-06, 2.505213099828436e-08, 1.6056659216954997e-10,
        7.776598118106928e-13),
    "sin_s.d": (-0.16666666666666666, 0.008333333333333042, -0.00019841269840962473,
        2.7557319073985213e-06, -2.5052070923650132e-08, 1.605431169309165e-10,
        -7.389471159841322e-13),
    "sin_s.fd": (-0.16666666640771796, 0.008333329301897785, -0.00019839311317352754,
        2.7181125080647204e-06),
    "cos_c.d": (0.041666666666666595, -0.0013888888888873338, 2.480158728899748e-05,
        -2.755731421529908e-07, 2.0875705114980556e-09, -1.1358732774806961e-11),
    "cos_c.fd": (0.04166666661944555, -0.0013888883496159302, 2.4799459126106485e-05,
        -2.720566947056088e-07),
    "atan_a.d": (-0.33333333333333315, 0.19999999999993773, -0.14285714284999318,
        0.1111111107011329, -0.09090907707783133, 0.07692277689184054, -0.06666225628049931,
        0.05877821165356061, -0.052300789661371146, 0.04589664352815305, -0.03712342062872039,
        0.02366106019251444, -0.008369199527070874),
    "asin_q.d": (0.1666666666666666, 0.07500000000002384, 0.04464285713982736,
        0.030381944637734443, 0.022372151813355213, 0.01735294104586529, 0.013961932535627063,
        0.01158540277868292, 0.009485902581602746, 0.010000583139954113, 0.0007116447104111867,
        0.024764359118476572, -0.026072438140658426, 0.0336009664547414),
    "acosh_p.d": (1.0, -0.08333333333333305, 0.01874999999996104, -0.005580357140978816,
        0.0018988714822712714, -0.0006991293236508927, 0.0002711310458306204,
        -0.00010906431282829106, 4.497258855997384e-05, -1.862135978830231e-05,
        7.290606504849019e-06, -2.3181054831523816e-06, 4.194480891741725e-07),
    "erf_e.d": (0.1283791670955126, -0.37612638903184165, 0.11283791670977801,
        -0.026866170650007654, 0.005223977679290044, -0.0008548330493370543,
        0.00012055472269373553, -1.4929232414346131e-05, 1.6520966285473568e-06,
        -1.6958596437125266e-07, 1.805922609822481e-08, -1.866834368202977e-09),
    "erf_e.f": (0.12837916612625122, -0.37612593173980713, 0.11282911896705627,
        -0.026809535920619965, 0.005061882548034191, -0.0006374973454512656),
    "erf_e.fd": (0.12837916695747992, -0.376126370381202, 0.11283750171659439,
        -0.0268626817308241, 0.005209888251848669, -0.000825224882294053, 8.876279486385464e-05),
    "erf_kf.f": (0.21080905199050903, -0.07435595989227295, 0.02480309270322323,
        -0.00832564290612936, 0.0023697575088590384, -0.00013414646673481911,
        0.0011379148345440626, 0.000507027842104435, 0.00015687271661590785),
    "erfc_k0.5.d": ((0.5069376502931449, -5.3348151122418284e-17), -0.3679726916557954,
        0.23095813155129827, -0.12983606199487466, 0.06679054252758354, -0.03189726204052951,
        0.014289198663377717, -0.006051532243639474, 0.0024376375200069853,
        -0.0009385139064746091, 0.0003467462040924221, -0.0001233190080212475,
        4.242872838246723e-05, -1.444190193448497e-05, 4.312498289788023e-06),
    "erfc_k0.5.fd": (0.5069376502918812, -0.367972691147773, 0.23095813201279633,
        -0.12983617071702747, 0.06679053063575119, -0.0318909942358779, 0.014288218634226474,
        -0.00618496926076017, 0.0024762214405529225),
    "erfc_k1.d": ((0.3215854164543175, 1.6957622147838652e-17), -0.16362291773256005,
        0.07615103985547741, -0.03293090529956608, 0.013377340953067775, -0.005145957547804951,
        0.0018861348769234237, -0.0006619300707384394, 0.00022330994713478863,
        -7.265886662000637e-05, 2.28642784989584e-05, -6.975397379391609e-06,
        2.067187688183927e-06, -5.943975294140443e-07, 1.6679542511074158e-07,
        -4.965620727683062e-08, 1.3632039101112566e-08),
    "erfc_k1.fd": (0.32158541649949496, -0.16362291766160517, 0.07615103075455674,
        -0.03293090707007138, 0.013377632990391934, -0.005145980815969411, 0.0018828691076632623,
        -0.0006612869015110504, 0.00023810690165995205, -7.653965435058914e-05),
    "erfc_k2.d": ((0.17900115118138996, -5.548405124014448e-18), -0.05437226000717288,
        0.01588437115987136, -0.004479431018372518, 0.0012230390523757574,
        -0.0003241255444941979, 8.355413964353169e-05, -2.0989464500471685e-05,
        5.146436464169386e-06, -1.2333674930783396e-06, 2.892670325670197e-07,
        -6.646757322904013e-08, 1.4976914010699847e-08, -3.311622331476838e-09,
        7.208716700472001e-10, -1.550851746791568e-10, 3.152661883760368e-11,
        -5.9388565248658295e-12, 1.6939312578806213e-12, -4.694412968417583e-13),
    "erfc_k2.fd": (0.17900115117312307, -0.05437226001320643, 0.015884371758854862,
        -0.004479430992125276, 0.0012230320528552761, -0.0003241248931377542,
        8.358390686664131e-05, -2.099397834333925e-05, 5.089630946479995e-06,
        -1.2229007867128727e-06, 3.38436043735038e-07, -7.656237890778011e-08),
    "erfc_k4.d": ((0.09277656780053835, 6.320795977339118e-18), -0.015060353489052318,
        0.0024144468662244205, -0.00038244819447051003, 5.9878849700781305e-05,
        -9.270038506662461e-06, 1.4195395534644995e-06, -2.1508605187349497e-07,
        3.2255810556200995e-08, -4.789155148788482e-09, 7.041761299006744e-10,
        -1.0256122997767105e-10, 1.4801218094166017e-11, -2.1172694674804036e-12,
        2.99802005267468e-13, -4.196510182178088e-14, 5.950683221445642e-15,
        -8.58774559911628e-16, 9.919020994374806e-17, -9.274369789734023e-18,
        3.1566866371410964e-18, -6.321247174689651e-19),
    "erfc_k4.fd": (0.09277656780029699, -0.015060353453594272, 0.002414446865594272,
        -0.00038244844280229366, 5.9878871912025325e-05, -9.269544095170616e-06,
        1.4194835254452443e-06, -2.1550511308655066e-07, 3.2308314395671134e-08,
        -4.618474904340071e-09, 6.815553413398366e-10, -1.350252606848011e-10,
        1.9265369518553743e-11),
    "erfc_k8.d": ((0.051080594758088446, -2.474183925565577e-18), -0.004606082417566812,
        0.00041368816485350867, -3.700840278548056e-05, 3.2978671066255365e-06,
        -2.927458450326552e-07, 2.5887603734700433e-08, -2.280629709126365e-09,
        2.0016924976009202e-10, -1.7503985693002182e-11, 1.5250738342146435e-12,
        -1.3239741373698284e-13, 1.1452644410833114e-14, -9.869091460984187e-16,
        8.479580045483469e-17, -7.297915667700125e-18, 6.200383762180314e-19,
        -4.928413538349154e-20, 4.317130325536871e-21, -5.311687405092628e-22,
        4.1369695683841266e-23),
    "erfc_k8.fd": (0.051080594754453874, -0.004606082417421419, 0.0004136881939331847,
        -3.700840491336481e-05, 3.297829562974762e-06, -2.9274284820926687e-07,
        2.590523662689996e-08, -2.2820876864961975e-09, 1.9645993753082824e-10,
        -1.719131998895498e-11, 1.877017824312374e-12, -1.6243407967672596e-13),
    "erfc_k14.d": ((0.026835813158647956, 7.314119764428038e-19), -0.0012750144322983953,
        6.0510080381663255e-05, -2.868496188977245e-06, 1.358302065634766e-07,
        -6.424740458047601e-09, 3.0355231726132446e-10, -1.4326227227377662e-11,
        6.753859350840717e-13, -3.18050286605222e-14, 1.4961131742766881e-15,
        -7.029980383036921e-17, 3.2997145331823617e-18, -1.5476061280159492e-19,
        7.248811854017282e-21, -3.375305970565019e-22, 1.5763407206241824e-23,
        -7.722563934406513e-25, 3.622047440366429e-26, -1.172950119004632e-27,
        5.25568850416781e-29, -6.599712938781684e-30, 3.1494642245453025e-31),
    "erfc_k14.fd": (0.026835813158619163, -0.0012750144225355637, 6.05100799669837e-05,
        -2.868501748475338e-06, 1.3583045668613166e-07, -6.423841201633377e-09,
        3.0351110897357976e-10, -1.438804688183168e-11, 6.78244638138836e-13,
        -2.977026218579731e-14, 1.4015037608706726e-15, -1.0128209289145303e-16,
        4.7457866767182275e-18),
    "erfinv_w.d": (1.6536545627148431, 0.24015818182925744, -0.00603367127258796,
        -0.0007407005393080844, 0.00018673495232101619, -1.3884469583174016e-05,
        -1.3659505980289337e-06, 4.243234187969921e-07, -2.8933327871861687e-08,
        -4.3027996566043824e-09, 1.0340426553250237e-09, -3.088204205204397e-11,
        -1.2490429669703902e-11, 1.1446541615788604e-12),
    "erfinv_w.f": (1.6536545753479004, 0.24015817046165466, -0.006033752579241991,
        -0.0007406826480291784, 0.0001868191611720249, -1.3893323739466723e-05,
        -1.3977467006043298e-06, 4.2656759546844114e-07, -2.3514871827501338e-08,
        -4.6505945761055045e-09, 6.08947892111189e-10),
    "erfinv_v.d": (3.083885610413536, 1.005258971038456, 0.005370924778862827,
        -0.00375133563703945, 0.00249123163819799, -0.001686906101662149, 0.0009548472403886482,
        -0.0003612329441566279, 1.8932037139790647e-05, 8.140823016760347e-05,
        -4.0024922500194474e-05),
    "erfinv_v.f": (3.083885669708252, 1.005258321762085, 0.0053675067611038685,
        -0.003739674109965563, 0.0025200259406119585, -0.0017466091085225344,
        0.0008849442237988114, -0.00024279514036606997, 4.857351086684503e-05),
    "erfinv_u.d": (4.84990640160121, 1.0103004708864403, -0.00013872532599388892,
        -0.00021510142139978685, 7.603191986371214e-05, -1.9458624053100312e-05,
        4.434279600713225e-06, -1.2376561793532193e-06, 3.275423463922098e-07),
    "lgamma_l1.d": (-0.5772156649015329, 0.8224670334241132, -0.4006856343865188,
        0.270580808427785, -0.20738555103400022, 0.16955717700065454, -0.14404989590732192,
        0.1255096687382377, -0.11133433547521626, 0.10009953435973566, -0.09095087299262525,
        0.0833499217383239, -0.07701524391705805, 0.07154600684242333, -0.0654218278509246,
        0.06065184336612571, -0.06850984848693958, 0.07129671987245978, -0.027309631934376917),
    "lgamma_l1.fd": (-0.5772156649044057, 0.8224670344180988, -0.40068563302010896,
        0.2705804913184732, -0.20738554931324998, 0.16958538584121138, -0.1440629518682187,
        0.12449254693207554, -0.11063178204338713, 0.11588426168591305, -0.10402044722508005),
    "lgamma_l2.d": (0.42278433509846713, 0.3224670334241132, -0.06735230105319823,
        0.02058080842778667, -0.00738555102866216, 0.0028905103306402767, -0.0011927539121059955,
        0.0005096695269833035, -0.00022315475141895227, 9.945748506050258e-05,
        -4.492630874963499e-05, 2.0507424154176454e-05, -9.43902414966858e-06,
        4.373819583907634e-06, -2.0411695649290437e-06, 9.585981827647096e-07,
        -4.438162280485201e-07, 2.044470733231066e-07, -1.1024641009871133e-07,
        5.868544798396634e-08, -1.1789053256747041e-08, 1.1195707214719894e-09,
        -1.1676149842796875e-08, 6.990254484594322e-09),
    "lgamma_l2.fd": (0.4227843350487728, 0.32246703287903544, -0.06735229437307248,
        0.020580837195115387, -0.0073856987054179545, 0.002890087434603529,
        -0.0011915325680672577, 0.00051227876019964, -0.0002278988532739461,
        9.182259678396792e-05, -3.576967878382719e-05, 3.073741402409219e-05,
        -1.7539171013737963e-05),
    "lgamma_k.d": (0.08333333333333245, -0.0027777777768033477, 0.0007936504183274915,
        -0.0005951698059975424, 0.0008353172544908506, -0.001608954040241313),
    "digamma_d.d": (0.9510558760318328, -0.42362742128146114, 0.24054248424082936,
        -0.1484049230537217, 0.09498872444604994, -0.061922133289386595, 0.04076083437088625,
        -0.026975796104112448, 0.017907234468644773, -0.01190823230674348, 0.007927281709125858,
        -0.005279776344317937, 0.003515067982103427, -0.002346824072135646,
        0.0015861675835468457, -0.001029527687493018, 0.0005811088017130319,
        -0.0005080956508459322, 0.0006522683711373939, -0.00010521946308763554,
        -0.0004579061858886606, -0.00020853756475965447, 0.0005230076789103178),
    "digamma_a.d": (0.08333333333333261, -0.008333333332020746, 0.003968253155626435,
        -0.004166431164593995, 0.0075406882494626366, -0.018460499681996378),
    "cbrt_init.d": (0.47333068086039304, 0.8381600271760821, -0.4692287111223973,
        0.20277722405496146, -0.050386537377832316, 0.005348547365168095),
}


class _Format:
    """Bit layout of one float type."""

    def __init__(self, bits, mant, sqrt_half_bits, suffix):
        self.bits, self.mant, self.bias = bits, mant, (1 << (bits - mant - 2)) - 1
        self.sqrt_half_bits, self.suffix = sqrt_half_bits, suffix
        self.min_normal = 2.0 ** (1 - self.bias)


_FORMATS = {"float": _Format(32, 23, 0x3F3504F3, "f32"),
            "double": _Format(64, 52, 0x3FE6A09E667F3BCD, "f64")}


# --------------------------------------------------------------------- a small IR DSL

class _Val:
    """An LLVM value (float, same-width integer or i1) with Python operators, so that the
    formulas below read like the mathematics. No fast-math flags: IEEE semantics throughout."""
    __slots__ = ("g", "v")

    def __init__(self, g, v):
        self.g, self.v = g, v

    def _lift(self, other):
        return other.v if isinstance(other, _Val) else self.g.constant(self.v.type, other)

    @property
    def _is_float(self):
        return isinstance(self.v.type, (ir.FloatType, ir.DoubleType))

    def _op(self, fop, iop, other, swap=False):
        a, b = self.v, self._lift(other)
        a, b = (b, a) if swap else (a, b)
        return _Val(self.g, getattr(self.g.b, fop if self._is_float else iop)(a, b))

    def __add__(self, o): return self._op("fadd", "add", o)
    def __radd__(self, o): return self._op("fadd", "add", o, True)
    def __sub__(self, o): return self._op("fsub", "sub", o)
    def __rsub__(self, o): return self._op("fsub", "sub", o, True)
    def __mul__(self, o): return self._op("fmul", "mul", o)
    def __rmul__(self, o): return self._op("fmul", "mul", o, True)
    def __truediv__(self, o): return self._op("fdiv", None, o)
    def __rtruediv__(self, o): return self._op("fdiv", None, o, True)
    def __and__(self, o): return self._op(None, "and_", o)
    def __or__(self, o): return self._op(None, "or_", o)
    def __lshift__(self, o): return self._op(None, "shl", o)
    def __rshift__(self, o): return self._op(None, "ashr", o)   # arithmetic

    def __neg__(self):
        return _Val(self.g, (self.g.b.fneg if self._is_float else self.g.b.neg)(self.v))

    def __invert__(self):
        return _Val(self.g, self.g.b.not_(self.v))

    def _cmp(self, op, other, ordered=True):
        b = self.g.b
        if not self._is_float:
            return _Val(self.g, b.icmp_signed(op, self.v, self._lift(other)))
        fcmp = b.fcmp_ordered if ordered else b.fcmp_unordered
        return _Val(self.g, fcmp(op, self.v, self._lift(other)))

    def __lt__(self, o): return self._cmp("<", o)
    def __le__(self, o): return self._cmp("<=", o)
    def __gt__(self, o): return self._cmp(">", o)
    def __ge__(self, o): return self._cmp(">=", o)

    def eq(self, o):
        return self._cmp("==", o)

    def ne(self, o):
        """Unordered: true when either side is NaN."""
        return self._cmp("!=", o, ordered=False)

    def isnan(self):
        return self._cmp("uno", self)

    def signbit(self):
        return self.bits() < 0

    def abs(self): return self.g.intrinsic("fabs", self)
    def floor(self): return self.g.intrinsic("floor", self)
    def rint(self): return self.g.intrinsic("rint", self)       # nearest, ties to even
    def sqrt(self): return self.g.intrinsic("sqrt", self)
    def copysign(self, sign): return self.g.intrinsic("copysign", self, sign)
    def min(self, o): return self.g.intrinsic("minnum", self, o)   # NaN loses
    def max(self, o): return self.g.intrinsic("maxnum", self, o)

    def bits(self):
        return _Val(self.g, self.g.b.bitcast(self.v, self.g.ity))

    def to_int(self):
        """fptosi: only for values already known to be small integers (else poison)."""
        return _Val(self.g, self.g.b.fptosi(self.v, self.g.ity))

    def to_float(self):
        return _Val(self.g, self.g.b.sitofp(self.v, self.g.ty))


class _Code:
    """Emits arithmetic of one float type `ty` at `builder`. `acc` names the coefficient set:
    "d" (double), "f" (float), "fd" (a float32 function computed in double)."""

    def __init__(self, builder, ty, acc):
        self.b, self.ty, self.acc = builder, ty, acc
        self.fmt = _FORMATS[str(ty)]
        self.ity = ir.IntType(self.fmt.bits)
        self.is_double = acc != "f"

    def constant(self, ty, value):
        if isinstance(ty, ir.IntType):
            return ir.Constant(ty, int(value))
        return ir.Constant(ty, float(value))

    def f(self, value):
        return _Val(self, ir.Constant(self.ty, float(value)))

    def i(self, value):
        return _Val(self, ir.Constant(self.ity, int(value)))

    def pick(self, double, single):
        return double if self.is_double else single

    def coef(self, key):
        return _COEFFS.get(f"{key}.{self.acc}") or _COEFFS[f"{key}.d"]

    def select(self, cond, a, b):
        return _Val(self, self.b.select(cond.v, self._v(a), self._v(b)))

    def choose(self, conds, values):
        """values[i] where i is the number of leading true `conds` (ascending thresholds)."""
        out = values[0]
        for cond, value in zip(conds, values[1:]):
            out = self.select(cond, value, out)
        return out

    def piecewise_poly(self, x, conds, tables):
        """The polynomial tables[i] at x, i chosen per lane as in `choose` (coefficients are
        selected, so only one polynomial is evaluated)."""
        def column(k):
            values = [t[k] if k < len(t) else 0.0 for t in tables]
            if not any(isinstance(v, tuple) for v in values):
                return self.choose(conds, values)
            pairs = [v if isinstance(v, tuple) else (v, 0.0) for v in values]
            return tuple(self.choose(conds, [p[i] for p in pairs]) for i in (0, 1))
        return self.poly(x, [column(k) for k in range(max(len(t) for t in tables))])

    def _v(self, x):
        return x.v if isinstance(x, _Val) else ir.Constant(self.ty, float(x))

    def intrinsic(self, name, *args):
        module = self.b.module
        full = f"llvm.{name}.{self.fmt.suffix}"
        fn = module.globals.get(full)
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(self.ty, [self.ty] * len(args)), name=full)
        return _Val(self, self.b.call(fn, [self._v(a) for a in args]))

    def fma(self, a, b, c):
        """a * b + c with one rounding (exact products for the double-double steps)."""
        return self.intrinsic("fma", a, b, c)

    def mad(self, a, b, c):
        """a * b + c, fused where the target has FMA (polynomials: either way is accurate)."""
        return self.intrinsic("fmuladd", a, b, c)

    def poly(self, x, coeffs):
        """sum coeffs[k] x^k by Horner's rule, lowest degree first; coefficients may be _Vals
        (chosen per lane), and the constant term a (hi, lo) pair, added last."""
        if isinstance(coeffs[0], tuple):
            hi, lo = coeffs[0]
            return self.mad(self.poly(x, coeffs[1:]), x, lo) + hi
        acc = coeffs[-1]
        for c in reversed(coeffs[:-1]):
            acc = self.mad(acc, x, c)
        return acc if isinstance(acc, _Val) else self.f(acc)

    def two_sum(self, a, b):
        """(s, e) with s = fl(a + b) and s + e = a + b exactly."""
        s = a + b
        bv = s - a
        return s, (a - (s - bv)) + (b - bv)

    def from_bits(self, i):
        return _Val(self, self.b.bitcast(i.v, self.ty))

    def pow2(self, n):
        """2^n for an integer _Val n in the normal exponent range."""
        return self.from_bits((n + self.fmt.bias) << self.fmt.mant)

    def scale(self, p, n):
        """p * 2^n for a float-valued integer n, in two exact steps so that a result near the
        overflow or underflow threshold rounds once."""
        k = n.to_int()
        k1 = k >> 1
        return p * self.pow2(k1) * self.pow2(k - k1)

    def call(self, name, *args):
        """Another function of this library, at this type (inlined later)."""
        fn = _function(self.b.module, name, self.ty)
        return _Val(self, self.b.call(fn, [a.v for a in args]))


# --------------------------------------------------------------------------- exp family

def _exp_poly(g, r):
    """e^r for |r| <= ln2/2 + tiny."""
    return 1 + g.mad(r * r, g.poly(r, g.coef("exp_h")), r)


def _exp_of_reduced(g, n, r):
    """2^n e^r for |r| <= ln2/2 + tiny and a float-valued integer n in the clamp range."""
    return g.scale(_exp_poly(g, r), n)


def _reduce_ln2(g, x):
    """(n, t, ln2_lo): x = n ln2 + t - n ln2_lo, n = rint(x / ln2), t = x - n ln2_hi exact."""
    n = (x * LOG2E).rint()
    ln2_hi, ln2_lo = g.pick(LN2_42, LN2_16F)
    return n, x - n * ln2_hi, ln2_lo


def _exp_dd(g, hi, lo=None):
    """e^(hi + lo) for a small correction lo (hi's rounding error); NaN in hi propagates."""
    x = hi.max(g.pick(-746.0, -104.0)).min(g.pick(710.0, 89.0))
    n, t, ln2_lo = _reduce_ln2(g, x)
    if lo is not None:                                   # dropped where hi was clamped
        t = t + g.select(x.eq(hi), lo, 0.0)
    return g.select(hi.isnan(), hi, _exp_of_reduced(g, n, t - n * ln2_lo))


def _exp(g, x):
    return _exp_dd(g, x)


def _exp2(g, x):
    xc = x.max(-1080.0).min(1025.0)
    n = xc.rint()
    f = xc - n                                           # exact
    r = g.mad(f, LN2[0], f * LN2[1])
    return g.select(x.isnan(), x, _exp_of_reduced(g, n, r))


def _expm1(g, x):
    """e^x - 1 = 2^n (1 + e) - 1 with e = e^r - 1 carried as a pair, so that adding the exact
    2^n - 1 rounds once."""
    n, t, ln2_lo = _reduce_ln2(g, x.max(g.pick(-40.0, -20.0)).min(g.pick(710.0, 89.0)))
    r = t - n * ln2_lo
    r_lo = (t - r) - n * ln2_lo
    q = r * r * g.poly(r, g.coef("exp_h"))
    e = r + q
    e_lo = ((r - e) + q) + g.mad(r_lo, r, r_lo)          # + r_lo e^r
    big = n >= g.pick(60.0, 26.0)                        # the -1 no longer matters
    two_n = g.pow2(g.select(big, 0.0, n).to_int())
    hi, lo = g.two_sum(two_n - 1, two_n * e)             # both exact
    small = hi + g.mad(two_n, e_lo, lo)
    res = g.select(big, g.scale(1 + (e + e_lo), n), small)
    return g.select(x.abs() >= g.pick(2.0 ** -54, 2.0 ** -25), res, x)   # tiny, +-0, NaN: x


# --------------------------------------------------------------------------- log family

def _log_dd(g, hi, lo=None):
    """log(hi + lo) for a correction |lo| << hi; -inf at 0, NaN below 0 or for NaN, inf at inf.
    hi = 2^k m with m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f):
    log(1 + f) = 2 atanh(s) = f - (f^2/2 - s (f^2/2 + R(s^2)))."""
    fmt = g.fmt
    sub = hi < fmt.min_normal
    xs = g.select(sub, hi * 2.0 ** (fmt.mant + 1), hi)
    e = (xs.bits() - fmt.sqrt_half_bits) >> fmt.mant
    m = g.from_bits(xs.bits() - (e << fmt.mant))
    k = e.to_float() - g.select(sub, fmt.mant + 1.0, 0.0)
    f = m - 1
    s = f / (2 + f)
    z = s * s
    hf = 0.5 * f * f
    ln2_hi, ln2_lo = g.pick(LN2_42, LN2_16F)
    low = k * ln2_lo if lo is None else k * ln2_lo + lo / hi
    res = k * ln2_hi - ((hf - g.mad(s, hf + z * g.poly(z, g.coef("log_p")), low)) - f)
    res = g.select(hi > 0, res, g.select(hi.eq(0), float("-inf"), float("nan")))
    return g.select(hi.eq(float("inf")), hi, res)


def _log(g, x):
    return _log_dd(g, x)


def _log1p(g, x):
    u = 1 + x
    res = _log_dd(g, u, x - (u - 1))
    return g.select(x.abs() >= g.pick(2.0 ** -54, 2.0 ** -25), res, x)


# --------------------------------------------------------------------------- hyperbolic

def _tanh(g, x):
    """a + a^3 T(a^2) below 0.6, 1 - 2/(e^(2a) + 1) above; 2a is clamped where tanh rounds to 1
    (so e^(2a) needs neither overflow handling nor a two-step scale)."""
    a = x.abs()
    z = a * a
    small = g.mad(a * z, g.poly(z, g.coef("tanh_t")), a)
    n, t, ln2_lo = _reduce_ln2(g, (a + a).min(g.pick(40.0, 20.0)))
    r = t - n * ln2_lo
    e = _exp_poly(g, r) * g.pow2(n.to_int())
    res = g.select(a < 0.6, small, 1 - 2 / (e + 1)).copysign(x)
    return g.select(x.isnan(), x, res)


def _logistic(g, x):
    """1/(1 + e) for x >= 0 and e/(1 + e) below, e = e^-|x| (no cancellation, no overflow)."""
    e = g.call("exp", -x.abs())
    return g.select(x >= 0, 1.0, e) / (1 + e)


def _huge_exp_half(g, a):
    """e^a / 2 = e^(a - ln 2) with a - ln 2 as a pair, for a > 709 (where e^a overflows)."""
    hi, lo = g.two_sum(a, -LN2[0])
    return _exp_dd(g, hi, lo - LN2[1])


def _cosh(g, x):
    a = x.abs()
    e = g.call("exp", a)
    return g.select(a > 709.0, _huge_exp_half(g, a), 0.5 * e + 0.5 / e)


def _sinh(g, x):
    """a + a^3 S(a^2) below 1, (e + e/(e + 1))/2 with e = expm1(a) above."""
    a = x.abs()
    z = a * a
    small = g.mad(a * z, g.poly(z, g.coef("sinh_s")), a)
    em = g.call("expm1", a)
    res = g.select(a < 1, small, 0.5 * (em + em / (em + 1)))
    return g.select(a > 709.0, _huge_exp_half(g, a), res).copysign(x)


def _log_with_ln2(g, hi, lo, huge):
    """log(hi + lo), plus ln 2 where `huge` (callers pass hi = |x| there: log 2|x|)."""
    return _log_dd(g, hi, lo) + g.select(huge, LN2[0], 0.0)


def _one_plus(g, u):
    """(hi, lo) = 1 + u as a pair, for log1p-accurate logarithms."""
    hi = 1 + u
    return hi, u - (hi - 1)


def _asinh(g, x):
    a = x.abs()
    huge, mid = a > 2.0 ** 28, a > 2.0
    a2 = a * a
    small_hi, small_lo = _one_plus(g, a + a2 / (1 + (1 + a2).sqrt()))
    hi = g.select(huge, a, g.select(mid, 2 * a + 1 / ((a2 + 1).sqrt() + a), small_hi))
    return _log_with_ln2(g, hi, g.select(mid, 0.0, small_lo), huge).copysign(x)


def _acosh(g, x):
    """sqrt(2t) P(t) for x = 1 + t in [1, 1.5]; log(2x - 1/(x + sqrt(x^2 - 1))) above, and
    log(x) + log 2 beyond 2^28. NaN below 1."""
    huge = x > 2.0 ** 28
    t = x - 1
    small = (2 * t).sqrt() * g.poly(t, g.coef("acosh_p"))
    mid = 2 * x - 1 / (x + (x * x - 1).sqrt())
    res = g.select(x <= 1.5, small, _log_with_ln2(g, g.select(huge, x, mid), None, huge))
    return g.select(x < 1, float("nan"), res)


def _atanh(g, x):
    a = x.abs()
    u = g.select(a < 0.5, 2 * a + 2 * a * a / (1 - a), 2 * a / (1 - a))
    return (0.5 * _log_dd(g, *_one_plus(g, u))).copysign(x)


# ------------------------------------------------------------------------ trigonometric

# Arguments up to 2^20 (double) or 2^24 (float32, reduced in double) use Cody-Waite; larger
# ones Payne-Hanek with a table of (2^e 2/pi) mod 4 per binary exponent e of x (its entries
# are gathered, so the loop still vectorises).
_CODY_WAITE_LIMIT = {"d": 2.0 ** 20, "fd": 2.0 ** 24}
_EXPONENTS = {"d": (-32, 971), "fd": (-28, 75)}     # e with x = M 2^e, M a 53-bit integer


def _cody_waite(g, x):
    """(r, r_lo, q) with x = q pi/2 + r + r_lo, |r| <= pi/4 + tiny, q an integer (only its
    low two bits are used). pi/2 is split into three parts whose first two have trailing
    zeros, so n * part is exact while |x| <= _CODY_WAITE_LIMIT."""
    p1, p2, p3 = PIO2_33 if g.acc == "d" else PIO2_28
    n = (x * TWO_OVER_PI).rint()
    t = x - n * p1                                       # exact
    hi, lo = g.two_sum(t, -(n * p2))                     # n * p2 exact
    lo = lo - n * p3
    r = hi + lo
    return r, lo - (r - hi), n.to_int()


@functools.lru_cache(maxsize=None)
def _two_over_pi_table(e_min, e_max):
    """For e in [e_min, e_max]: (2^e 2/pi) mod 4 as three doubles t0 + t1 + t2 (~2^-150)."""
    out = []
    for e in range(e_min, e_max + 1):
        v = Fraction(TWO_OVER_PI_1200 * 2 ** max(e, 0), 2 ** (1200 - min(e, 0))) % 4
        for _ in range(3):
            out.append(float(v))
            v -= Fraction(out[-1])
    return tuple(out)


def _payne_hanek(g, ax):
    """(r, r_lo, q) as _cody_waite, for finite ax > _CODY_WAITE_LIMIT: ax = M 2^e, and
    M ((2^e 2/pi) mod 4) = M (t0 + t1 + t2) summed exactly (fma products, two_sum) mod 4."""
    e_min, e_max = _EXPONENTS[g.acc]
    e = ((ax.bits() >> 52) & 0x7FF) - 1075
    m = ax * g.pow2(-e)                                  # the 53-bit integer M
    table = _table_global(g, e_min, e_max)
    t0, t1, t2 = (_load(g, table, (e - e_min) * 3 + k) for k in range(3))
    p0, p1 = m * t0, m * t1
    p0r = p0 - 4 * (p0 * 0.25).floor()                   # p0 mod 4, exact
    hi, lo = g.two_sum(p0r, g.fma(m, t0, -p0))
    hi, lo2 = g.two_sum(hi, p1)
    lo = lo + (lo2 + (g.fma(m, t1, -p1) + m * t2))
    n = hi.rint()
    f = (hi - n) + lo
    f_lo = lo - (f - (hi - n))
    r = f * PIO2[0]
    return r, g.fma(f, PIO2[0], -r) + (f * PIO2[1] + f_lo * PIO2[0]), n.to_int()


def _table_global(g, e_min, e_max):
    module = g.b.module
    name = f"kiln.math.two_over_pi.{e_min}.{e_max}"
    table = module.globals.get(name)
    if table is None:
        values = _two_over_pi_table(e_min, e_max)
        ty = ir.ArrayType(F64, len(values))
        table = ir.GlobalVariable(module, ty, name)
        table.linkage, table.global_constant, table.unnamed_addr = "internal", True, True
        table.initializer = ir.Constant(ty, values)
    return table


def _load(g, table, index):
    ptr = g.b.gep(table, [ir.Constant(ir.IntType(32), 0), index.v], inbounds=True,
                  source_etype=table.value_type)
    return _Val(g, g.b.load(ptr, typ=F64))


def _reduce_pio2(g, x):
    """(r, r_lo, q) for any finite x (Cody-Waite or Payne-Hanek); garbage, but no poison, for
    infinite or NaN x, which callers replace."""
    ax = x.abs()
    limit = _CODY_WAITE_LIMIT[g.acc]
    small = ax <= limit
    r, r_lo, q = _cody_waite(g, g.select(small, x, 0.0))
    big = g.select(small | ~(ax < float("inf")), 2 * limit, ax)
    br, br_lo, bq = _payne_hanek(g, big)
    neg = x < 0
    br, br_lo, bq = g.select(neg, -br, br), g.select(neg, -br_lo, br_lo), g.select(neg, -bq, bq)
    return g.select(small, r, br), g.select(small, r_lo, br_lo), g.select(small, q, bq)


def _sin_kernel(g, r, r_lo):
    """sin(r + r_lo) for |r| <= pi/4 + tiny, as a (hi, lo) pair."""
    z = r * r
    tail = g.mad(r * z, g.poly(z, g.coef("sin_s")), r_lo * (1 - 0.5 * z))
    hi = r + tail
    return hi, tail - (hi - r)


def _cos_kernel(g, r, r_lo):
    """cos(r + r_lo) for |r| <= pi/4 + tiny, as a (hi, lo) pair; 1 - r^2/2 is rounded once and
    its rounding error carried."""
    z = r * r
    hz = 0.5 * z
    w = 1 - hz
    rest = ((1 - w) - hz) + g.mad(z * z, g.poly(z, g.coef("cos_c")), -(r * r_lo))
    hi = w + rest
    return hi, rest - (hi - w)


def _quadrants(g, r, r_lo, q):
    """(sin, cos) of q pi/2 + r + r_lo."""
    s, c = _sin_kernel(g, r, r_lo)[0], _cos_kernel(g, r, r_lo)[0]
    odd = (q & 1).ne(0)
    sin, cos = g.select(odd, c, s), g.select(odd, s, c)
    return g.select((q & 2).ne(0), -sin, sin), g.select(((q + 1) & 2).ne(0), -cos, cos)


def _sincos(g, x):
    """(sin x, cos x); NaN for infinite or NaN x."""
    finite = x.abs() < float("inf")
    sin, cos = _quadrants(g, *_reduce_pio2(g, x))
    return g.select(finite, sin, float("nan")), g.select(finite, cos, float("nan"))


def _sin(g, x):
    return g.select(x.eq(0), x, _sincos(g, x)[0])


def _cos(g, x):
    return _sincos(g, x)[1]


def _tan(g, x):
    """sin/cos (-cos/sin in odd quadrants) of the reduced argument, both as pairs, divided with
    a correction step."""
    r, r_lo, q = _reduce_pio2(g, x)
    s, c = _sin_kernel(g, r, r_lo), _cos_kernel(g, r, r_lo)
    odd = (q & 1).ne(0)
    num = [g.select(odd, -ci, si) for si, ci in zip(s, c)]
    den = [g.select(odd, si, ci) for si, ci in zip(s, c)]
    t = num[0] / den[0]
    res = t + (g.fma(-t, den[0], num[0]) + (num[1] - t * den[1])) / den[0]
    return g.select(x.eq(0), x, g.select(x.abs() < float("inf"), res, float("nan")))


def _atan_reduced(g, t, base):
    """base + atan(t) for |t| <= 1/2; base a (hi, lo) pair of _Vals or floats."""
    z = t * t
    return base[0] + (t + g.mad(t * z, g.poly(z, g.coef("atan_a")), base[1]))


def _atan(g, x):
    """atan(a) = pi/2 + atan(-1/a) above 2, pi/4 + atan((a - 1)/(a + 1)) above 1/2 (a - 1
    exact there), and the odd polynomial below."""
    a = x.abs()
    big, mid = a > 2, a > 0.5
    num = g.select(big, -1.0, g.select(mid, a - 1, a))
    den = g.select(big, a, g.select(mid, a + 1, 1.0))
    base = [g.select(big, PIO2[i], g.select(mid, PIO4[i], 0.0)) for i in (0, 1)]
    return _atan_reduced(g, num / den, base).copysign(x)


def _atan2(g, y, x):
    ax, ay = x.abs(), y.abs()
    swap = ay > ax
    num, den = g.select(swap, ax, ay), g.select(swap, ay, ax)
    both_inf = ax.eq(float("inf")) & ay.eq(float("inf"))
    num = g.select(both_inf, 1.0, num)
    den = g.select(both_inf | den.eq(0), 1.0, den)
    q = num / den                                        # in [0, 1]
    mid = q > 0.5
    t = g.select(mid, q - 1, q) / g.select(mid, q + 1, 1.0)
    r = _atan_reduced(g, t, [g.select(mid, PIO4[i], 0.0) for i in (0, 1)])
    r = g.select(swap, PIO2[0] - (r - PIO2[1]), r)
    r = g.select(x.signbit(), PI[0] - (r - PI[1]), r)
    return g.select(x.isnan() | y.isnan(), x + y, r.copysign(y))


def _asin_poly(g, z):
    """r(z) with asin(v) = v + v r(v^2)."""
    return z * g.poly(z, g.coef("asin_q"))


def _sqrt_split(g, z, s):
    """(w, c): w = s with its low 32 bits cleared (w^2 exact), w + c = sqrt(z) to ~2^-100."""
    w = g.from_bits(s.bits() & -(1 << 32))
    c = (z - w * w) / (s + w)
    return w, g.select(z.eq(0), 0.0, c)


def _asin(g, x):
    a = x.abs()
    big = a > 0.5
    z = g.select(big, 0.5 - 0.5 * a, a * a)
    s = z.sqrt()
    r = _asin_poly(g, z)
    w, c = _sqrt_split(g, z, s)
    # pi/2 - 2 (s + s r), with s = w + c carried exactly
    p = 2 * s * r - (PIO2[1] - 2 * c)
    big_v = PIO4[0] - (p - (PIO4[0] - 2 * w))
    return g.select(big, big_v, g.mad(a, r, a)).copysign(x)


def _acos(g, x):
    a = x.abs()
    small = a <= 0.5
    z = g.select(small, x * x, 0.5 - 0.5 * a)
    r = _asin_poly(g, z)
    s = z.sqrt()
    w, c = _sqrt_split(g, z, s)
    small_v = PIO2[0] - (x - (PIO2[1] - x * r))
    pos_v = 2 * (w + g.mad(s, r, c))
    neg_v = PI[0] - 2 * (s + (s * r - PIO2[1]))
    return g.select(small, small_v, g.select(x > 0, pos_v, neg_v))


# ---------------------------------------------------------------------------- roots, pow

def _sqrt(g, x):
    return x.sqrt()


def _rsqrt(g, x):
    return 1 / x.sqrt()


def _cbrt(g, x):
    """|x| = 2^(3q + rem) m: cbrt = 2^q cbrt(m 2^rem), m in [1, 2); a polynomial guess,
    Halley steps, and (double) a Newton step on the exact residual."""
    a = x.abs()
    sub = a < g.fmt.min_normal
    bits = g.select(sub, a * 2.0 ** 54, a).bits()
    e = ((bits >> 52) - 1023).to_float()
    m = g.from_bits((bits & ((1 << 52) - 1)) | (1023 << 52))
    q = ((e + 0.5) * (1 / 3)).floor()
    rem = e - 3 * q
    conds = [rem.eq(1), rem.eq(2)]
    mm = m * g.choose(conds, [1.0, 2.0, 4.0])
    y = g.poly(m, g.coef("cbrt_init")) * g.choose(conds, [1.0, CBRT2, CBRT4])
    for _ in range(2 if g.acc == "d" else 1):
        y3 = y * y * y
        y = y * (y3 + 2 * mm) / (2 * y3 + mm)
    if g.acc == "d":
        yy = y * y
        c = yy * y
        residual = (mm - c) - (g.fma(yy, y, -c) + g.fma(y, y, -yy) * y)
        y = g.mad(y, residual / (3 * mm), y)
    res = (y * g.pow2(q.to_int() - g.select(sub, g.i(18), g.i(0)))).copysign(x)
    return g.select((a > 0) & (a < float("inf")), res, x)


def _log_pow(g, ax):
    """log(ax) as a (hi, lo) pair good to ~2^-68 relative: ax = 2^k m, m = c (1 + d) with
    c = j/8 the nearest eighth, log(m/c) = 2 atanh(s), s = (m - c)/(m + c) as a pair."""
    sub = ax < g.fmt.min_normal
    xs = g.select(sub, ax * 2.0 ** 54, ax)
    e = (xs.bits() - g.fmt.sqrt_half_bits) >> 52
    m = g.from_bits(xs.bits() - (e << 52))
    k = e.to_float() - g.select(sub, 54.0, 0.0)
    j = (m * 8).rint()                                   # 6 .. 11
    c = j * 0.125
    num = m - c                                          # exact
    den, den_lo = g.two_sum(m, c)
    s = num / den
    s_lo = (g.fma(-s, den, num) - s * den_lo) / den
    z = s * s
    tail = g.mad(s * z, g.poly(z, g.coef("pow_log")), 2 * z * s_lo)
    conds = [j.eq(float(i)) for i in range(7, 12)]
    log_c = [g.choose(conds, [v[i] for v in LOG_J8]) for i in (0, 1)]
    a_hi, a_lo = g.two_sum(k * LN2_42[0], log_c[0])
    b_hi, b_lo = g.two_sum(a_hi, 2 * s)
    lo = a_lo + b_lo + (k * LN2_42[1] + log_c[1] + 2 * s_lo + tail)
    hi = b_hi + lo
    lo = lo - (hi - b_hi)
    edge = ax.eq(0) | ax.eq(float("inf")) | ax.isnan()
    hi = g.select(ax.eq(0), float("-inf"), g.select(edge, ax, hi))
    return hi, g.select(edge, 0.0, lo)


def _pow(g, x, y):
    ax = x.abs()
    if g.acc == "d":
        l_hi, l_lo = _log_pow(g, ax)
        z = y * l_hi
        z_lo = g.fma(y, l_hi, -z) + y * l_lo
        mag = _exp_dd(g, z, g.select(z.abs() < 1000.0, z_lo, 0.0))
    else:                                                # float32 in double: plenty
        mag = _exp_dd(g, y * _log_dd(g, ax))
    y_int = y.floor().eq(y)
    half = 0.5 * y
    y_odd = y_int & (y.abs() < 2.0 ** 53) & half.floor().ne(half)
    res = g.select(x.signbit() & y_odd, -mag, mag)
    res = g.select((x < 0) & (x > float("-inf")) & ~y_int, float("nan"), res)
    one = y.eq(0) | x.eq(1) | (ax.eq(1) & y.abs().eq(float("inf")))
    return g.select(one, 1.0, res)


# ------------------------------------------------------------------------- error function

def _erf_small(g, a):
    """erf(a) for |a| < 0.84375: a + a E(a^2)."""
    return g.mad(a, g.poly(a * a, g.coef("erf_e")), a)


def _erfc_big(g, a):
    """erfc(a) = e^(-a^2) K(a) for a >= 0.5, K a polynomial in a - (segment middle), which is
    exact (a is clamped to [0.5, 28], beyond which erfc underflows)."""
    ac = a.max(ERFC_SEGMENTS[0]).min(ERFC_SEGMENTS[-1])
    conds = [ac >= b for b in ERFC_SEGMENTS[1:-1]]
    u = ac - g.choose(conds, [(lo + hi) / 2 for lo, hi in zip(ERFC_SEGMENTS, ERFC_SEGMENTS[1:])])
    k = g.piecewise_poly(u, conds, [g.coef(f"erfc_k{lo:g}") for lo in ERFC_SEGMENTS[:-1]])
    h = ac * ac
    return _exp_dd(g, -h, -g.fma(ac, ac, -h)) * k


def _erf(g, x):
    """erf_small below 0.84375, 1 - erfc above; float32 in float, where erfc only needs an
    absolute 2^-25: e^(-a^2) (a^2 rounded) times one polynomial up to 4 (erf = 1 beyond)."""
    a = x.abs()
    if g.acc == "f":
        big = 1 - g.call("exp", -(a * a)) * g.poly(a.min(4.0) - 2.5, g.coef("erf_kf"))
    else:
        big = 1 - _erfc_big(g, a)
    res = g.select(a < 0.84375, _erf_small(g, a), big).copysign(x)
    return g.select(x.isnan(), x, res)


def _erfc(g, x):
    big = _erfc_big(g, x.abs())
    res = g.select(x >= 0.5, big, g.select(x > -0.84375, 1 - _erf_small(g, x), 2 - big))
    return g.select(x.isnan(), x, res)


def _erf_inv(g, x):
    """A piecewise polynomial in w = -log(1 - x^2) (relative error below 2^-32 in double,
    2^-26 in float), then for double one Newton step on erf(y) = |x| (on erfc(y) = 1 - |x| in
    the tail, where 1 - |x| is exact)."""
    a = x.abs()
    w = -g.call("log", (1 - a) * (1 + a))
    v = w.sqrt()
    if g.acc == "f":                                     # w < 16 for float32
        conds, tables, us = [w >= 6.25], ["erfinv_w", "erfinv_v"], [w - 3.125, v - 3.25]
    else:
        conds = [w >= 6.25, w >= 16.0]
        tables, us = ["erfinv_w", "erfinv_v", "erfinv_u"], [w - 3.125, v - 3.25, v - 5.0]
    y = a * g.piecewise_poly(g.choose(conds, us), conds, [g.coef(t) for t in tables])
    if g.acc == "d":
        residual = g.select(y < 0.84375, _erf_small(g, y) - a, (1 - a) - _erfc_big(g, y))
        y = y - residual / (TWO_OVER_SQRTPI * g.call("exp", -(y * y)))
    return g.select(a.eq(1), float("inf"), y).copysign(x)


# ------------------------------------------------------------------------ gamma functions

def _sincospi(g, x):
    """(sin pi x, cos pi x) for |x| < 2^52: x = n/2 + r exactly, |r| <= 1/4."""
    n = (x + x).rint()
    r = x - 0.5 * n
    hi = PI[0] * r
    lo = g.fma(PI[0], r, -hi) + PI[1] * r
    return _quadrants(g, hi, lo, n.to_int())


def _reflect_arg(g, x):
    """x where the reflection formulas can use it (|x| < 2^52), else 0 (then x is an integer)."""
    return g.select(x.abs() < 2.0 ** 52, x, 0.0)


def _lgamma(g, x):
    """For y = x > 0: Stirling with a fitted correction at y >= 8; lgamma(1 + t) = t L1(t) on
    [0.75, 1.25) and lgamma(2 + t) = t L2(t) on [1.25, 2.75), so that the zeros at 1 and 2 keep
    their relative accuracy; [2.75, 8) steps down, lgamma(y) = lgamma(y - n) + log((y-1)...(y-n));
    below 0.75 one step up, lgamma(y) = lgamma(y + 1) - log y. x < 0: log(pi / |sin(pi x)|) -
    lgamma(1 - x). inf at the poles 0, -1, -2, ..."""
    neg = x < 0
    y = g.select(neg, 1 - x, x)
    yy, prod = y, g.f(1.0)
    for _ in range(6):
        step = yy >= 2.75
        yy = g.select(step, yy - 1, yy)
        prod = g.select(step, prod * yy, prod)
    near_one = (y >= 0.75) & (y < 1.25)
    below = y < 0.75
    use_l1 = near_one | (y < 0.25)
    t = g.select(y < 1.25, g.select(y < 0.25, y, y - 1), yy - 2)
    tl = t * g.piecewise_poly(t, [use_l1], [g.coef("lgamma_l2"), g.coef("lgamma_l1")])
    big = y >= 8
    tiny_neg = neg & (x > -(2.0 ** -30))                 # lgamma(x) = -log(-x) - gamma x
    lv = g.call("log", g.select(tiny_neg, -x, g.select(big | below, y,
                                                        g.select(near_one, 1.0, prod))))
    inv = 1 / y
    stirling = (y - 0.5) * (lv - 1) + g.mad(inv, g.poly(inv * inv, g.coef("lgamma_k")),
                                            STIRLING_C)
    pos = g.select(big, stirling, g.select(below, tl - lv, tl + lv))
    s = _sincospi(g, _reflect_arg(g, x))[0]
    refl = g.select(tiny_neg, g.mad(-EULER, x, -lv), g.call("log", PI[0] / s.abs()) - pos)
    res = g.select(neg, refl, pos)
    return g.select(neg & s.eq(0), float("inf"), res)


def _digamma(g, x):
    """y >= 10: asymptotic series (fitted); below, recurrence into [1, 2] where psi(y) =
    (y - y0) D(y) around its root y0; x < 0: psi(1 - x) - pi cot(pi x). NaN at the poles."""
    pole = (x <= 0) & x.floor().eq(x)
    neg = x < 0
    y = g.select(neg, 1 - x, x)
    below_one = y < 1
    yy = g.select(below_one, y + 1, y)
    total = g.select(below_one, -1 / y, 0.0)            # psi(y) = psi(yy) + total
    for _ in range(8):
        step = yy > 2
        yy = g.select(step, yy - 1, yy)
        total = total + g.select(step, 1 / yy, 0.0)
    root = (yy - DIGAMMA_ROOT[0]) - DIGAMMA_ROOT[1]
    core = g.mad(root, g.poly(yy - 1.5, g.coef("digamma_d")), total)
    inv = 1 / y
    u = inv * inv
    asym = g.call("log", y) - g.mad(u, g.poly(u, g.coef("digamma_a")), 0.5 * inv)
    pos = g.select(y >= 10, asym, core)
    s, c = _sincospi(g, _reflect_arg(g, x))
    res = g.select(neg, pos - PI[0] * c / s, pos)
    return g.select(pole, float("nan"), res)


# ----------------------------------------------------------------------------- the table

_NATIVE, _DOUBLE = "native", "double"   # how the float32 variant computes

_SPECS = {
    "exp": (_exp, _NATIVE), "exp2": (_exp2, _DOUBLE), "expm1": (_expm1, _NATIVE),
    "log": (_log, _NATIVE), "log1p": (_log1p, _NATIVE), "tanh": (_tanh, _NATIVE),
    "logistic": (_logistic, _NATIVE), "sqrt": (_sqrt, _NATIVE), "rsqrt": (_rsqrt, _NATIVE),
    "sin": (_sin, _DOUBLE), "cos": (_cos, _DOUBLE), "tan": (_tan, _DOUBLE),
    "asin": (_asin, _DOUBLE), "acos": (_acos, _DOUBLE), "atan": (_atan, _DOUBLE),
    "atan2": (_atan2, _DOUBLE), "sinh": (_sinh, _DOUBLE), "cosh": (_cosh, _DOUBLE),
    "asinh": (_asinh, _DOUBLE), "acosh": (_acosh, _DOUBLE), "atanh": (_atanh, _DOUBLE),
    "cbrt": (_cbrt, _DOUBLE), "pow": (_pow, _DOUBLE), "erf": (_erf, _NATIVE),
    "erfc": (_erfc, _DOUBLE), "erf_inv": (_erf_inv, _NATIVE), "lgamma": (_lgamma, _DOUBLE),
    "digamma": (_digamma, _DOUBLE),
}
NAMES = frozenset(_SPECS)
_ARITY = {"atan2": 2, "pow": 2}


def emit(builder, name, args, ty):
    """Call the library's `name` on scalar `args` of float type `ty` at `builder`."""
    return builder.call(_function(builder.module, name, ty), list(args))


def _function(module, name, ty):
    if name not in _SPECS:
        raise ValueError(f"mathlib has no function {name!r}; it provides {sorted(NAMES)}")
    if str(ty) not in _FORMATS:
        raise TypeError(f"mathlib.{name} takes float or double, not {ty}")
    full = f"kiln.math.{name}.{_FORMATS[str(ty)].suffix}"
    fn = module.globals.get(full)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ty, [ty] * _ARITY.get(name, 1)), name=full)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    body, single = _SPECS[name]
    if ty == F64 or single == _NATIVE:
        g = _Code(builder, ty, "d" if ty == F64 else "f")
        builder.ret(body(g, *[_Val(g, a) for a in fn.args]).v)
    else:
        g = _Code(builder, F64, "fd")
        wide = [_Val(g, builder.fpext(a, F64)) for a in fn.args]
        builder.ret(builder.fptrunc(body(g, *wide).v, ty))
    return fn

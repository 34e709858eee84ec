"""ClickHouse's policy table: which calls, table functions and system tables are reads.

Allow-lists, as for the other dialects (see ``functions.py``): a name not listed here makes a
statement a ``write`` (a person decides). The names come from ClickHouse 26's own
``system.functions`` (as chDB ships it), grouped by family (type conversion, dates, strings,
arrays, JSON, URLs, hashes, maths, geo), without the families that reach past the query's
own arguments: dictionaries (``dictGet`` loads the dictionary's source, which may be a remote
server or a program), ``joinGet``, ``file``, ``url``, settings and server introspection
(``getSetting``, ``getMacro``, ``hasColumnInTable``, which may query a remote server),
``sleep``, ``throwIf`` and the debugging functions.

The engine's own walls stand behind this list (see :mod:`pi_notebook.sql.engines.chdb`):
every read runs with ``readonly=1`` (which also refuses every table function that reaches
a file, URL, server or program: it needs a temporary table) and ``max_memory_usage``.
"""

from __future__ import annotations

__all__ = [
    "BUILDING_AGGREGATES",
    "COMBINATORS",
    "EXTERNAL_TABLE_FUNCTIONS",
    "MAX_LITERAL_SIZE",
    "PURE_AGGREGATES",
    "PURE_FUNCTIONS",
    "PURE_TABLE_FUNCTIONS",
    "REJECT_FUNCTIONS",
    "SIZED_FUNCTIONS",
    "SYSTEM_READS",
]


def _names(text: str) -> frozenset[str]:
    return frozenset(name.lower() for name in text.split())


PURE_FUNCTIONS: frozenset[str] = _names(
    """
    toYYYYMM toYYYYMMDD toYYYYMMDDhhmmss
    abs accurateCast accurateCastOrDefault accurateCastOrNull acos acosh addDays addHours
    addMinutes addMonths addQuarters addSeconds addWeeks addYears age alphaTokens and array
    array_remove array_to_string arrayAll arrayAUC arrayAUCPR arrayAutocorrelation arrayAvg
    arrayBottomK arrayCompact arrayConcat arrayCount arrayCumSum arrayCumSumNonNegative
    arrayDifference arrayDistinct arrayDotProduct arrayElement arrayElementOrNull
    arrayEnumerate arrayEnumerateDense arrayEnumerateDenseRanked arrayEnumerateUniq
    arrayEnumerateUniqRanked arrayExcept arrayExists arrayFill arrayFilter arrayFirst
    arrayFirstIndex arrayFirstOrNull arrayFlatten arrayFlattenedLength arrayFold
    arrayIntersect arrayJaccardIndex arrayJoin arrayLast arrayLastIndex arrayLastOrNull
    arrayLevenshteinDistance arrayLevenshteinDistanceWeighted arrayMap arrayMax arrayMin
    arrayNormalizedGini arrayPartialReverseSort arrayPartialShuffle arrayPartialSort
    arrayPopBack arrayPopFront arrayPRAUC arrayProduct arrayPushBack arrayPushFront
    arrayRandomSample arrayReduce arrayReduceInRanges arrayRemove arrayReverse
    arrayReverseFill arrayReverseSort arrayReverseSplit arrayROCAUC arrayRotateLeft
    arrayRotateRight arrayShiftLeft arrayShiftRight arrayShingles arrayShuffle
    arraySimilarity arraySlice arraySort arraySplit arrayStringConcat arraySum
    arraySymmetricDifference arrayTopK arrayTranspose arrayUnion arrayUniq arrayZip
    arrayZipUnaligned ascii asin asinh assumeNotNull atan atan2 atanh bar base32Decode
    base32Encode base58Decode base58Encode base64Decode base64Encode base64URLDecode
    base64URLEncode bin bitAnd bitCount bitHammingDistance bitmapAnd bitmapAndCardinality
    bitmapAndnot bitmapAndnotCardinality bitmapBuild bitmapCardinality bitmapContains
    bitmapHasAll bitmapHasAny bitmapMax bitmapMin bitmapOr bitmapOrCardinality
    bitmapSubsetInRange bitmapSubsetLimit bitmapToArray bitmapTransform bitmapXor
    bitmapXorCardinality bitmaskToArray bitmaskToList bitNot bitOr bitPositionsToArray
    bitRotateLeft bitRotateRight bitShiftLeft bitShiftRight bitSlice bitTest bitTestAll
    bitTestAny bitXor CAST cbrt ceil ceiling changeDay changeHour changeMinute changeMonth
    changeSecond changeYear char cityHash64 coalesce concat concat_ws concatAssumeInjective
    concatWithSeparator concatWithSeparatorAssumeInjective cos cosh cosineDistance
    cosineDistanceTransposed cosineDistanceTransposedQuantized countDigits countEqual
    countMatches countMatchesCaseInsensitive countSubstrings countSubstringsCaseInsensitive
    countSubstringsCaseInsensitiveUTF8 currentDatabase currentSchemas currentUser
    cutQueryString cutQueryStringAndFragment damerauLevenshteinDistance date_bin date_diff
    dateDiff dateName dateTime64ToSnowflakeID dateTimeToSnowflakeID dateTimeToUUIDv7
    dateTrunc decodeURLComponent decodeURLFormComponent degrees divide divideDecimal
    divideOrNull domain domainRFC domainWithoutWWW domainWithoutWWWRFC dotProduct
    dotProductTransposed dotProductTransposedQuantized dynamicElement dynamicType e empty
    emptyArrayDate emptyArrayDateTime emptyArrayFloat32 emptyArrayFloat64 emptyArrayInt16
    emptyArrayInt32 emptyArrayInt64 emptyArrayInt8 emptyArrayString emptyArrayToSingle
    emptyArrayUInt16 emptyArrayUInt32 emptyArrayUInt64 emptyArrayUInt8 encodeURLComponent
    encodeURLFormComponent endsWith endsWithCaseInsensitive endsWithCaseInsensitiveUTF8
    endsWithUTF8 equals erf erfc exp exp10 exp2 extract extractAll extractAllGroups
    extractAllGroupsHorizontal extractAllGroupsVertical extractGroups extractKeyValuePairs
    extractKeyValuePairsWithEscaping extractTextFromHTML extractURLParameter
    extractURLParameterNames extractURLParameters farmHash64 finalizeAggregation
    firstSignificantSubdomain firstSignificantSubdomainCustom
    firstSignificantSubdomainCustomRFC firstSignificantSubdomainRFC flatten flattenTuple
    floor format formatDateTime formatDateTimeInJodaSyntax formatQuery formatQueryFromJSON
    formatQueryOrNull formatQuerySingleLine formatQuerySingleLineOrNull
    formatReadableDecimalSize formatReadableQuantity formatReadableSize
    formatReadableTimeDelta fragment fromDaysSinceYearZero fromDaysSinceYearZero32
    fromUnixTimestamp fromUnixTimestamp64Micro fromUnixTimestamp64Milli
    fromUnixTimestamp64Nano fromUnixTimestamp64Second fromUnixTimestampInJodaSyntax
    fromUTCTimestamp gcd generateUUIDv4 generateUUIDv7 geoDistance geohashDecode
    geohashEncode geohashesInBox getSizeOfEnumType getSubcolumn globalIn globalInIgnoreSet
    greatCircleAngle greatCircleDistance greater greaterOrEquals greatest h3CellAreaM2
    h3CellAreaRads2 h3Distance h3EdgeAngle h3EdgeLengthKm h3EdgeLengthM h3ExactEdgeLengthKm
    h3ExactEdgeLengthM h3ExactEdgeLengthRads h3GetBaseCell
    h3GetDestinationIndexFromUnidirectionalEdge h3GetFaces
    h3GetIndexesFromUnidirectionalEdge h3GetOriginIndexFromUnidirectionalEdge
    h3GetPentagonIndexes h3GetRes0Indexes h3GetResolution h3GetUnidirectionalEdge
    h3GetUnidirectionalEdgeBoundary h3GetUnidirectionalEdgesFromHexagon h3HexAreaKm2
    h3HexAreaM2 h3HexRing h3IndexesAreNeighbors h3IsPentagon h3IsResClassIII h3IsValid
    h3kRing h3Line h3NumHexagons h3PointDistKm h3PointDistM h3PointDistRads h3PolygonToCells
    h3PolygonToCellsWithContainment h3ToCenterChild h3ToChildren h3ToGeo h3ToGeoBoundary
    h3ToParent h3ToString h3UnidirectionalEdgeIsValid halfMD5 has hasAll hasAllToken
    hasAllTokens hasAny hasAnyToken hasAnyTokens hasPhrase hasSubsequence
    hasSubsequenceCaseInsensitive hasSubsequenceCaseInsensitiveUTF8 hasSubsequenceUTF8
    hasSubstr hasToken hasTokenCaseInsensitive hasTokenCaseInsensitiveOrNull hasTokenOrNull
    hex hypot identity if ifNotFinite ifNull ilike in indexOf indexOfAssumeSorted initcap
    initcapUTF8 initializeAggregation instr intDiv intDivOrNull intDivOrZero intHash32
    intHash64 IPv4CIDRToRange IPv4NumToString IPv4NumToStringClassC IPv4StringToNum
    IPv4StringToNumOrDefault IPv4StringToNumOrNull IPv4ToIPv6 IPv6CIDRToRange
    IPv6NumToString IPv6StringToNum IPv6StringToNumOrDefault IPv6StringToNumOrNull
    isDecimalOverflow isDynamicElementInSharedData isFinite isInfinite isIPv4String
    isIPv6String isNaN isNotDistinctFrom isNotNull isNull isNullable isValidJSON isValidUTF8
    isZeroOrNull jaroSimilarity jaroWinklerSimilarity javaHash javaHashUTF16LE
    JSON_ARRAY_LENGTH JSON_EXISTS JSON_QUERY JSON_VALUE JSONAllPaths JSONAllPathsWithTypes
    JSONAllValues JSONArrayLength JSONDynamicPaths JSONDynamicPathsWithTypes JSONExtract
    JSONExtractArrayRaw JSONExtractArrayRawCaseInsensitive JSONExtractBool
    JSONExtractBoolCaseInsensitive JSONExtractCaseInsensitive JSONExtractFloat
    JSONExtractFloatCaseInsensitive JSONExtractInt JSONExtractIntCaseInsensitive
    JSONExtractKeys JSONExtractKeysAndValues JSONExtractKeysAndValuesCaseInsensitive
    JSONExtractKeysAndValuesRaw JSONExtractKeysAndValuesRawCaseInsensitive
    JSONExtractKeysCaseInsensitive JSONExtractRaw JSONExtractRawCaseInsensitive
    JSONExtractString JSONExtractStringCaseInsensitive JSONExtractUInt
    JSONExtractUIntCaseInsensitive JSONHas JSONKey JSONLength JSONMergePatch
    JSONSharedDataPaths JSONSharedDataPathsWithTypes JSONType jumpConsistentHash
    kostikConsistentHash L1Distance L1Norm L1Normalize L2Distance L2DistanceTransposed
    L2DistanceTransposedQuantized L2Norm L2Normalize L2SquaredDistance L2SquaredNorm lcase
    lcm least left leftUTF8 length lengthUTF8 less lessOrEquals levenshteinDistance
    levenshteinDistanceUTF8 lgamma like locate log log10 log1p log2 lower lowerUTF8 ltrim
    makeDate makeDate32 makeDateTime makeDateTime64 map mapAdd mapAll mapApply mapConcat
    mapContains mapContainsKey mapContainsKeyLike mapContainsValue mapContainsValueLike
    mapExists mapExtractKeyLike mapExtractValueLike mapFilter mapFromArrays mapFromString
    mapKeys mapPartialReverseSort mapPartialSort mapPopulateSeries mapReverseSort mapSort
    mapSubtract mapUpdate mapValues match matchCaseInsensitive matchPhrase mid midpoint
    minus modulo moduloLegacy moduloOrNull moduloOrZero monthName multiIf multiply
    multiplyDecimal murmurHash2_32 murmurHash2_64 murmurHash3_128 murmurHash3_32
    murmurHash3_64 negate ngramDistance ngramDistanceCaseInsensitive
    ngramDistanceCaseInsensitiveUTF8 ngramDistanceUTF8 ngramMinHash ngramMinHashArg
    ngramMinHashArgCaseInsensitive ngramMinHashArgCaseInsensitiveUTF8 ngramMinHashArgUTF8
    ngramMinHashCaseInsensitive ngramMinHashCaseInsensitiveUTF8 ngramMinHashUTF8 ngrams
    ngramSearch ngramSearchCaseInsensitive ngramSearchCaseInsensitiveUTF8 ngramSearchUTF8
    ngramSimHash ngramSimHashCaseInsensitive ngramSimHashCaseInsensitiveUTF8
    ngramSimHashUTF8 normalizedQueryHash normalizedQueryHashKeepNames normalizeL1
    normalizeL2 normalizeLinf normalizeLp normalizeQuery normalizeQueryKeepNames
    normalizeUTF8NFC normalizeUTF8NFD normalizeUTF8NFKC normalizeUTF8NFKCCasefold
    normalizeUTF8NFKD not notEmpty notEquals notHas notILike notIn notInIgnoreSet notLike
    notMatch notMatchCaseInsensitive notNullIn notNullInIgnoreSet now now64 nowInBlock
    nowInBlock64 nullIf nullIn nullInIgnoreSet or parseDateTime parseDateTime32BestEffort
    parseDateTime32BestEffortOrNull parseDateTime32BestEffortOrZero parseDateTime64
    parseDateTime64BestEffort parseDateTime64BestEffortOrNull
    parseDateTime64BestEffortOrZero parseDateTime64BestEffortUS
    parseDateTime64BestEffortUSOrNull parseDateTime64BestEffortUSOrZero
    parseDateTime64InJodaSyntax parseDateTime64InJodaSyntaxOrNull
    parseDateTime64InJodaSyntaxOrZero parseDateTime64OrNull parseDateTime64OrZero
    parseDateTimeBestEffort parseDateTimeBestEffortOrNull parseDateTimeBestEffortOrZero
    parseDateTimeBestEffortUS parseDateTimeBestEffortUSOrNull
    parseDateTimeBestEffortUSOrZero parseDateTimeInJodaSyntax
    parseDateTimeInJodaSyntaxOrNull parseDateTimeInJodaSyntaxOrZero parseDateTimeOrNull
    parseDateTimeOrZero parseISO8601Duration parseQueryToJSON parseReadableSize
    parseReadableSizeOrNull parseReadableSizeOrZero path pathFull pi plus pointInEllipses
    pointInPolygon polygonAreaCartesian polygonAreaSpherical polygonConvexHullCartesian
    polygonPerimeterCartesian polygonPerimeterSpherical polygonsDistanceCartesian
    polygonsDistanceSpherical polygonsEqualsCartesian polygonsIntersectCartesian
    polygonsIntersectionCartesian polygonsIntersectionSpherical polygonsIntersectSpherical
    polygonsSymDifferenceCartesian polygonsSymDifferenceSpherical polygonsUnionCartesian
    polygonsUnionSpherical polygonsWithinCartesian polygonsWithinSpherical position
    positionCaseInsensitive positionCaseInsensitiveUTF8 positionUTF8 positive_modulo
    positive_modulo_or_null positiveModulo positiveModuloOrNull pow power printf protocol
    queryString queryStringAndFragment radians rand rand32 rand64 randBernoulli randBinomial
    randCanonical randChiSquared randConstant randExponential randFisherF randLogNormal
    randNegativeBinomial randNormal randomHadamardTransform randPoisson randStudentT
    randUniform regexp_instr regexpExtract regexpInstr regexpPosition regexpQuoteMeta
    reinterpret reinterpretAsDate reinterpretAsDateTime reinterpretAsFixedString
    reinterpretAsFloat32 reinterpretAsFloat64 reinterpretAsInt128 reinterpretAsInt16
    reinterpretAsInt256 reinterpretAsInt32 reinterpretAsInt64 reinterpretAsInt8
    reinterpretAsString reinterpretAsUInt128 reinterpretAsUInt16 reinterpretAsUInt256
    reinterpretAsUInt32 reinterpretAsUInt64 reinterpretAsUInt8 reinterpretAsUUID replace
    replaceAll replaceOne replaceRegexpAll replaceRegexpOne reverse reverseBySeparator
    reverseUTF8 right rightUTF8 round roundAge roundBankers roundDown roundDuration
    roundToExp2 rtrim serverTimezone sign sin sinh sipHash128 sipHash128Keyed
    sipHash128Reference sipHash128ReferenceKeyed sipHash64 sipHash64Keyed
    snowflakeIDToDateTime snowflakeIDToDateTime64 soundex splitByAlpha splitByChar
    splitByNonAlpha splitByRegexp splitByString splitByWhitespace sqrt startsWith
    startsWithCaseInsensitive startsWithCaseInsensitiveUTF8 startsWithUTF8 str_to_date
    substring substringIndex substringIndexUTF8 substringUTF8 subtractDays subtractHours
    subtractInterval subtractMicroseconds subtractMilliseconds subtractMinutes
    subtractMonths subtractNanoseconds subtractQuarters subtractSeconds
    subtractTupleOfIntervals subtractWeeks subtractYears tan tanh tgamma time_bucket
    timeDiff timeSeriesCopyTag timeSeriesCopyTags timeSeriesExtractTag timeSeriesFromGrid
    timeSeriesGroupToSamplingKey timeSeriesGroupToTags timeSeriesIdToGroup
    timeSeriesIdToTags timeSeriesIdToTagsGroup timeSeriesJoinTags
    timeSeriesMetricTypeToSuffixes timeSeriesPrometheusValueToString timeSeriesRange
    timeSeriesRemoveAllTagsExcept timeSeriesRemoveTag timeSeriesRemoveTags
    timeSeriesReplaceTag timeSeriesStoreTags timeSeriesTagsGroupToTags timeSeriesTagsToGroup
    timeSeriesTagsToMap timeSeriesThrowDuplicateSeriesIf timeSlot timeSlots timestamp
    timestamp_diff timestampDiff timeZone timezone timezoneOf timeZoneOf timeZoneOffset
    timezoneOffset toBool toColumnTypeName toDate toDate32 toDate32OrDefault toDate32OrNull
    toDate32OrZero toDateOrDefault toDateOrNull toDateOrZero toDateTime toDateTime32
    toDateTime64 toDateTime64OrDefault toDateTime64OrNull toDateTime64OrZero
    toDateTimeOrDefault toDateTimeOrNull toDateTimeOrZero today toDayOfMonth toDayOfWeek
    toDayOfYear toDaysInMonth toDaysSinceYearZero toDecimal128 toDecimal128OrDefault
    toDecimal128OrNull toDecimal128OrZero toDecimal256 toDecimal256OrDefault
    toDecimal256OrNull toDecimal256OrZero toDecimal32 toDecimal32OrDefault toDecimal32OrNull
    toDecimal32OrZero toDecimal64 toDecimal64OrDefault toDecimal64OrNull toDecimal64OrZero
    toDecimalString toFixedString toFloat32 toFloat32OrDefault toFloat32OrNull
    toFloat32OrZero toFloat64 toFloat64OrDefault toFloat64OrNull toFloat64OrZero toHour
    toInt128 toInt128OrDefault toInt128OrNull toInt128OrZero toInt16 toInt16OrDefault
    toInt16OrNull toInt16OrZero toInt256 toInt256OrDefault toInt256OrNull toInt256OrZero
    toInt32 toInt32OrDefault toInt32OrNull toInt32OrZero toInt64 toInt64OrDefault
    toInt64OrNull toInt64OrZero toInt8 toInt8OrDefault toInt8OrNull toInt8OrZero toInterval
    toIntervalDay toIntervalHour toIntervalMicrosecond toIntervalMillisecond
    toIntervalMinute toIntervalMonth toIntervalNanosecond toIntervalQuarter toIntervalSecond
    toIntervalWeek toIntervalYear toIPv4 toIPv4OrDefault toIPv4OrNull toIPv4OrZero toIPv6
    toIPv6OrDefault toIPv6OrNull toIPv6OrZero toISOWeek toISOYear toJSONString
    toLastDayOfMonth toLastDayOfWeek toLowCardinality toMicrosecond toMillisecond toMinute
    toMonday toMonth toMonthNumSinceEpoch toNanosecond toNullable topLevelDomain
    topLevelDomainRFC toQuarter toRelativeDayNum toRelativeHourNum toRelativeMinuteNum
    toRelativeMonthNum toRelativeSecondNum toRelativeWeekNum toRelativeYearNum toSecond
    toStartOfDay toStartOfFifteenMinutes toStartOfFiveMinute toStartOfFiveMinutes
    toStartOfHour toStartOfInterval toStartOfISOYear toStartOfMicrosecond
    toStartOfMillisecond toStartOfMinute toStartOfMonth toStartOfNanosecond toStartOfQuarter
    toStartOfSecond toStartOfTenMinutes toStartOfWeek toStartOfYear toString
    toStringCutToZero toTime toTime64 toTime64OrNull toTime64OrZero toTimeOrNull
    toTimeOrZero toTimeWithFixedDate toTimeZone toTimezone toTypeName toUInt128
    toUInt128OrDefault toUInt128OrNull toUInt128OrZero toUInt16 toUInt16OrDefault
    toUInt16OrNull toUInt16OrZero toUInt256 toUInt256OrDefault toUInt256OrNull
    toUInt256OrZero toUInt32 toUInt32OrDefault toUInt32OrNull toUInt32OrZero toUInt64
    toUInt64OrDefault toUInt64OrNull toUInt64OrZero toUInt8 toUInt8OrDefault toUInt8OrNull
    toUInt8OrZero toUnixTimestamp toUnixTimestamp64Micro toUnixTimestamp64Milli
    toUnixTimestamp64Nano toUnixTimestamp64Second toUTCTimestamp toUUID toUUIDOrDefault
    toUUIDOrNull toUUIDOrZero toValidUTF8 toWeek toYear toYearNumSinceEpoch toYearWeek
    transform translate translateUTF8 trim trimBoth trimLeft trimRight trunc truncate
    tryBase32Decode tryBase58Decode tryBase64Decode tryBase64URLDecode tuple tupleConcat
    tupleDivide tupleDivideByNumber tupleElement tupleHammingDistance tupleIntDiv
    tupleIntDivByNumber tupleIntDivOrZero tupleIntDivOrZeroByNumber tupleMinus tupleModulo
    tupleModuloByNumber tupleMultiply tupleMultiplyByNumber tupleNames tupleNegate tuplePlus
    tuplePositiveModuloByNumber tupleToNameValuePairs ucase unhex upper upperUTF8 URLHash
    URLHierarchy URLPathHierarchy user UTCTimestamp UUIDNumToString UUIDStringToNum
    UUIDToNum UUIDv7ToDateTime variantElement variantType version visibleWidth week
    wordShingleMinHash wordShingleMinHashArg wordShingleMinHashArgCaseInsensitive
    wordShingleMinHashArgCaseInsensitiveUTF8 wordShingleMinHashArgUTF8
    wordShingleMinHashCaseInsensitive wordShingleMinHashCaseInsensitiveUTF8
    wordShingleMinHashUTF8 wordShingleSimHash wordShingleSimHashCaseInsensitive
    wordShingleSimHashCaseInsensitiveUTF8 wordShingleSimHashUTF8 xor xxHash32 xxHash64
    xxHash64Spark yandexConsistentHash yearweek yesterday YYYYMMDDhhmmssToDateTime
    YYYYMMDDhhmmssToDateTime64 YYYYMMDDToDate YYYYMMDDToDate32
    """
)
"""Scalar functions (lower case) that read only their arguments, the clock, the session's
identity or a random source."""

PURE_AGGREGATES: frozenset[str] = _names(
    """
    analysisOfVariance anova any any_respect_nulls any_value any_value_respect_nulls
    anyHeavy anyLast anyLast_respect_nulls anyLastRespectNulls anyRespectNulls
    anyValueRespectNulls approx_top_count approx_top_k approx_top_sum argAndMax argAndMin
    argMax argMin avg avgWeighted BIT_AND BIT_OR BIT_XOR boundingRatio
    categoricalInformationValue contingency corr corrMatrix corrStable count COVAR_POP
    COVAR_SAMP covarPop covarPopMatrix covarPopStable covarSamp covarSampMatrix
    covarSampStable cramersV cramersVBiasCorrected cume_dist deltaSum deltaSumTimestamp
    dense_rank denseRank distinctDynamicTypes distinctJSONPaths distinctJSONPathsAndTypes
    entropy exponentialMovingAverage exponentialTimeDecayedAvg exponentialTimeDecayedCount
    exponentialTimeDecayedMax exponentialTimeDecayedSum first_value
    first_value_respect_nulls firstValueRespectNulls gini groupArrayIntersect groupArrayLast
    groupArrayMovingAvg groupArrayMovingSum groupArraySample groupArraySorted groupBitAnd
    groupBitmap groupBitmapAnd groupBitmapOr groupBitmapXor groupBitOr groupBitXor
    groupNumericIndexedVector intervalLengthSum kolmogorovSmirnovTest kurtPop kurtSamp lag
    lagInFrame largestTriangleThreeBuckets last_value last_value_respect_nulls
    lastValueRespectNulls lead leadInFrame lttb mannWhitneyUTest max max_by maxIntersections
    maxIntersectionsPosition maxMappedArrays meanZTest median medianBFloat16
    medianBFloat16Weighted medianDD medianDeterministic medianExact medianExactHigh
    medianExactLow medianExactWeighted medianExactWeightedInterpolated medianGK
    medianInterpolatedWeighted medianTDigest medianTDigestWeighted medianTiming
    medianTimingWeighted mergedJSONPatch min min_by minMappedArrays nonNegativeDerivative
    nth_value ntile percent_rank percentRank quantile quantileBFloat16
    quantileBFloat16Weighted quantileDD quantileDeterministic quantileExact
    quantileExactExclusive quantileExactHigh quantileExactInclusive quantileExactLow
    quantileExactWeighted quantileExactWeightedInterpolated quantileGK
    quantileInterpolatedWeighted quantilePrometheusHistogram quantiles quantilesBFloat16
    quantilesBFloat16Weighted quantilesDD quantilesDeterministic quantilesExact
    quantilesExactExclusive quantilesExactHigh quantilesExactInclusive quantilesExactLow
    quantilesExactWeighted quantilesExactWeightedInterpolated quantilesGK
    quantilesInterpolatedWeighted quantilesPrometheusHistogram quantilesTDigest
    quantilesTDigestWeighted quantilesTiming quantilesTimingWeighted quantileTDigest
    quantileTDigestWeighted quantileTiming quantileTimingWeighted rank rankCorr regr_avgx
    regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy
    retention row_number sequenceCount sequenceMatch sequenceMatchEvents sequenceNextNode
    simpleLinearRegression singleValueOrNull skewPop skewSamp sparkBar sparkbar STD STDDEV
    STDDEV_POP STDDEV_SAMP stddevPop stddevPopStable stddevSamp stddevSampStable
    stochasticLinearRegression stochasticLogisticRegression studentTTest
    studentTTestOneSample sum sumCount sumKahan sumMapFiltered sumMapFilteredWithOverflow
    sumMappedArrays sumMapWithOverflow sumWithOverflow theilsU timeSeriesAvgToGrid
    timeSeriesBottomKMasks timeSeriesChangesToGrid timeSeriesCountToGrid
    timeSeriesDeltaToGrid timeSeriesDerivToGrid timeSeriesGroupArray
    timeSeriesIncreaseToGrid timeSeriesInstantDeltaToGrid timeSeriesInstantRateToGrid
    timeSeriesLastToGrid timeSeriesLastTwoSamples timeSeriesLimitKMasks timeSeriesMaxToGrid
    timeSeriesMinToGrid timeSeriesPredictLinearToGrid timeSeriesRateToGrid
    timeSeriesResampleToGridWithStaleness timeSeriesResetsToGrid timeSeriesSumToGrid
    timeSeriesTimestampOfMaxToGrid timeSeriesTimestampOfMinToGrid timeSeriesTopKMasks topK
    topKWeighted uniq uniqCombined uniqCombined64 uniqExact uniqHLL12 uniqUpTo VAR_POP
    VAR_SAMP varPop varPopStable varSamp varSampStable welchTTest windowFunnel
    """
)
"""Aggregate and window functions whose state is bounded by their kind, not by their input
(``groupArray`` and friends are in :data:`BUILDING_AGGREGATES`)."""

BUILDING_AGGREGATES: frozenset[str] = _names(
    """groupArray groupUniqArray groupArraySample groupArraySorted groupArrayLast groupConcat
    group_concat string_agg array_agg"""
)
"""Aggregates that keep their whole input (one array or string per group): a read only with
a literal size bound, ``groupArray(100)(x)`` (at most :data:`MAX_LITERAL_SIZE`)."""

COMBINATORS: tuple[str, ...] = tuple(
    name.lower()
    for name in """MergeState SimpleState OrDefault ForEach Resample Distinct Argmin Argmax
    OrNull State Merge Array Map If""".split()
)
"""Aggregate combinator suffixes (``sumIf``, ``uniqMerge``, ``avgOrNullIf``), longest first."""

PURE_TABLE_FUNCTIONS: frozenset[str] = _names(
    "numbers numbers_mt zeros zeros_mt primes generate_series generateSeries values"
)
"""Table functions that generate rows from their literal arguments only."""

SIZED_FUNCTIONS: frozenset[str] = _names(
    """numbers numbers_mt zeros zeros_mt primes generate_series generateSeries range
    arrayWithConstant arrayResize repeat space leftPad rightPad leftPadUTF8 rightPadUTF8
    randomString randomFixedString randomPrintableASCII randomStringUTF8 replicate
    generateRandom"""
)
"""Calls whose size (rows, elements, characters) is set by an argument: a read only when
every numeric argument is an integer literal of at most :data:`MAX_LITERAL_SIZE`."""

MAX_LITERAL_SIZE = 10_000_000

EXTERNAL_TABLE_FUNCTIONS: frozenset[str] = _names(
    """file fileCluster url urlCluster s3 s3Cluster gcs oss cosn hdfs hdfsCluster
    azureBlobStorage azureBlobStorageCluster remote remoteSecure cluster clusterAllReplicas
    input mysql postgresql jdbc odbc mongodb redis sqlite bigquery arrowstream ytsaurus
    iceberg icebergS3 icebergAzure icebergHDFS icebergLocal icebergCluster icebergS3Cluster
    icebergAzureCluster icebergHDFSCluster icebergLocalCluster deltaLake deltaLakeS3
    deltaLakeAzure deltaLakeLocal deltaLakeCluster deltaLakeS3Cluster deltaLakeAzureCluster
    hudi hudiCluster paimon paimonS3 paimonAzure paimonHDFS paimonLocal paimonCluster
    paimonS3Cluster paimonAzureCluster paimonHDFSCluster dictionary dictGet filesystem merge
    loop eval prometheusQuery prometheusQueryRange timeSeriesData timeSeriesMetrics
    timeSeriesSamples timeSeriesTags timeSeriesSelector timeSeriesMetricFamilies
    mergeTreeIndex mergeTreeProjection mergeTreeAnalyzeIndexes mergeTreeAnalyzeIndexesUUID
    mergeTreeCodecBlockCounts mergeTreeTextIndex view viewIfPermitted viewExplain
    fuzzJSON fuzzQuery null"""
)
"""Table functions (and calls) that reach files, URLs, object stores, other servers,
dictionaries' sources, other databases by pattern (``merge``) or the host's file system."""

REJECT_FUNCTIONS: frozenset[str] = _names("executable executablePool python catboostEvaluate")
"""Never run, approval or not: ``executable`` runs a program on the host, chDB's ``python``
reads the kernel's Python variables, ``catboostEvaluate`` loads a native library."""

SYSTEM_READS: frozenset[str] = _names(
    """one numbers numbers_mt zeros zeros_mt primes tables columns databases functions
    table_functions table_engines database_engines formats data_type_families
    aggregate_function_combinators collations time_zones contributors licenses keywords
    parts parts_columns projection_parts projections data_skipping_indices constraints
    codecs errors events metrics warnings unicode data_skipping_index_types disk_types
    dictionary_layouts dictionary_sources"""
)
"""``system`` tables that describe the schema, the data's parts or the engine's catalogue.
Every other ``system`` table asks: they expose users, roles, grants, quotas, settings and
profiles, named collections (credentials), other queries (``processes``, ``query_log``),
disks and paths, clusters and hosts."""

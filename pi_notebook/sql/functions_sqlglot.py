"""sqlglot's typed function classes, sorted into pure and impure.

The parser maps a known SQL function to one of these classes (``exp.Lower``,
``exp.DateTrunc``...) whatever the dialect, so they are listed once, here.
``tests/sql/test_sql_functions.py`` checks that every class sqlglot knows is either in
:data:`PURE_FUNCTION_CLASSES` or in :data:`IMPURE_FUNCTION_CLASSES`, so a sqlglot upgrade
cannot silently add an unreviewed class. The per-dialect names of the calls sqlglot leaves
anonymous are listed in :mod:`pi_notebook.sql.functions`.
"""

from __future__ import annotations

__all__ = ["IMPURE_FUNCTION_CLASSES", "PURE_FUNCTION_CLASSES"]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


PURE_FUNCTION_CLASSES: frozenset[str] = _names(
    """
    Abs Acos Acosh AddMonths And AnyValue ApproxDistinct ApproxPercentileAccumulate
    ApproxPercentileCombine ApproxPercentileEstimate ApproxQuantile ApproxQuantiles ApproxTopK
    ApproxTopKAccumulate ApproxTopKCombine ApproxTopKEstimate ApproxTopSum ApproximateSimilarity
    ArgMax ArgMin Array ArrayAgg ArrayAll ArrayAny ArrayAppend ArrayCompact ArrayConcat
    ArrayConcatAgg ArrayConstructCompact ArrayContainedBy ArrayContains ArrayContainsAll
    ArrayDistinct ArrayExcept ArrayFilter ArrayFirst ArrayInsert ArrayIntersect ArrayLast
    ArrayMax ArrayMin ArrayOverlaps ArrayPosition ArrayPrepend ArrayRemove ArrayRemoveAt
    ArrayReverse ArraySize ArraySlice ArraySort ArraySum ArrayToString ArrayUnionAgg
    ArrayUniqueAgg ArraysZip Ascii Asin Asinh Atan Atan2 Atanh Avg Base64DecodeBinary
    Base64DecodeString Base64Encode BitLength BitmapBitPosition BitmapBucketNumber
    BitmapConstructAgg BitmapCount BitmapOrAgg BitwiseAndAgg BitwiseCount BitwiseOrAgg
    BitwiseXorAgg Booland Boolnot Boolor BoolxorAgg ByteLength Case Cast CastToStrType Cbrt Ceil
    CheckJson CheckXml Chr CityHash64 Coalesce CodePointsToBytes CodePointsToString Collate
    Collation Columns Compress Concat ConcatWs ConnectByRoot Contains Convert ConvertTimezone
    ConvertToCharset Corr Cos Cosh CosineDistance Cot Coth Count CountIf CovarPop CovarSamp Csc
    Csch CumeDist CurrentAccount CurrentAccountName CurrentAvailableRoles CurrentCatalog
    CurrentClient CurrentDatabase CurrentDate CurrentDatetime CurrentIpAddress
    CurrentOrganizationName CurrentOrganizationUser CurrentRegion CurrentRole CurrentRoleType
    CurrentSchema CurrentSchemas CurrentSecondaryRoles CurrentSession CurrentStatement
    CurrentTime CurrentTimestamp CurrentTimestampLTZ CurrentTimezone CurrentTransaction
    CurrentUser CurrentUserId CurrentVersion CurrentWarehouse Date DateAdd DateBin DateDiff
    DateFromParts DateFromUnixDate DateStrToDate DateSub DateToDateStr DateToDi DateTrunc
    Datetime DatetimeAdd DatetimeDiff DatetimeSub DatetimeTrunc Day DayOfMonth DayOfWeek
    DayOfWeekIso DayOfYear Dayname Decode DecodeCase DecompressBinary DecompressString Decrypt
    DecryptRaw Degrees DenseRank DiToDate DotProduct Elt Encode Encrypt EncryptRaw EndsWith
    EqualNull EuclideanDistance Exists Exp Explode ExplodingGenerateSeries Extract Factorial
    FarmFingerprint First FirstValue Flatten Float64 Floor Format FromBase FromBase32 FromBase64
    FromISO8601Date FromISO8601Timestamp FromISO8601TimestampNanos FromJson GapFill
    GenerateDateArray GenerateSeries GenerateTimestampArray GetExtract GetIgnoreCase Getbit
    Greatest GroupConcat Grouping GroupingId HashAgg Hex HexDecodeString Hll Host Hour If
    Initcap Inline Int64 IsArray IsAscii IsInf IsNan IsNullValue JSONArray JSONArrayAgg
    JSONArrayAppend JSONArrayContains JSONArrayInsert JSONBContains JSONBContainsAllTopKeys
    JSONBContainsAnyTopKeys JSONBContainsTopKey JSONBDeleteAtPath JSONBExists JSONBExtract
    JSONBExtractScalar JSONBObjectAgg JSONBPathExists JSONBool JSONCast JSONExists JSONExtract
    JSONExtractArray JSONExtractScalar JSONFormat JSONKeys JSONKeysAtDepth JSONObject
    JSONObjectAgg JSONRemove JSONSet JSONStripNulls JSONTable JSONType JSONValueArray
    JarowinklerSimilarity JustifyDays JustifyHours JustifyInterval Kurtosis Lag Last LastDay
    LastValue LaxBool LaxFloat64 LaxInt64 LaxString Lead Least Left Length Levenshtein List Ln
    Localtime Localtimestamp Log LogicalAnd LogicalOr Lower LowerHex MD5 MD5Digest
    MD5NumberLower64 MD5NumberUpper64 MakeInterval ManhattanDistance Map MapCat MapContainsKey
    MapDelete MapFromEntries MapInsert MapKeys MapPick MapSize MatchAgainst Max Median Min
    Minhash MinhashCombine Minute Mode Month Monthname MonthsBetween Nanvl Negative NetFunc
    NextDay Normal Normalize NthValue Ntile Nullif NumberToStr Nvl2 ObjectAgg ObjectId
    ObjectInsert ObjectTransform OpenJSON Or Overlay Pad ParseBignumeric ParseDatetime ParseIp
    ParseJSON ParseNumeric ParseTime ParseUrl PercentRank PercentileCont PercentileDisc Pi
    Posexplode PosexplodeOuter Pow PreviousDay Quantile Quarter Radians Rand Randn Randstr
    RangeBucket RangeN Rank Reduce RegDomain RegexpCount RegexpExtract RegexpExtractAll
    RegexpFullMatch RegexpILike RegexpInstr RegexpLike RegexpReplace RegexpSplit RegexpSubstr
    RegrAvgx RegrAvgy RegrCount RegrIntercept RegrR2 RegrSlope RegrSxx RegrSxy RegrSyy RegrValx
    RegrValy Repeat Replace Reverse Right Rint Round RowNumber RtrimmedLength SHA SHA1Digest
    SHA2 SHA2Digest SafeAdd SafeConvertBytesToString SafeDivide SafeFunc SafeMultiply SafeNegate
    SafeSubtract Search SearchIp Sec Sech Second SessionUser Shuffle Sign Sin Sinh Skewness
    Soundex SoundexP123 Space Split SplitPart SplitToTable Sqrt StDistance StPoint Stack
    StandardHash StarMap StartsWith Stddev StddevPop StddevSamp StrPosition StrToDate StrToMap
    StrToTime StrToUnix String StringToArray StripNullValue Strtok StrtokSplitToTable
    StrtokToArray Struct StructExtract Stuff Substring SubstringIndex Sum Systimestamp Tan Tanh
    Time TimeAdd TimeDiff TimeFromParts TimeSlice TimeStrToDate TimeStrToTime TimeStrToUnix
    TimeSub TimeToStr TimeToTimeStr TimeToUnix TimeTrunc Timestamp TimestampAdd TimestampDiff
    TimestampFromParts TimestampLtzFromParts TimestampSub TimestampTrunc TimestampTzFromParts
    ToArray ToBase32 ToBase64 ToBinary ToBoolean ToChar ToCodePoints ToDays ToDecfloat ToDouble
    ToMap ToNumber ToVariant Transform Translate Trim Trunc Try TryBase64DecodeBinary
    TryBase64DecodeString TryCast TryHexDecodeBinary TryHexDecodeString TryToDecfloat TsOrDiToDi
    TsOrDsAdd TsOrDsDiff TsOrDsToDate TsOrDsToDateStr TsOrDsToDatetime TsOrDsToTime
    TsOrDsToTimestamp Typeof Unhex Unicode Uniform UnixDate UnixMicros UnixMillis UnixSeconds
    UnixToStr UnixToTime UnixToTimeStr Unnest Upper UtcDate UtcTime UtcTimestamp Uuid VarMap
    Variance VariancePop Week WeekOfYear WeekStart WeightString WidthBucket XMLElement XMLGet
    XMLTable Xor Year YearOfWeek YearOfWeekIso Zipf _ExplodeOuter
    """
)
"""sqlglot function classes whose evaluation reads only its arguments (or the clock,
the session's identity, a random source): no data, schema, session or host effect."""

IMPURE_FUNCTION_CLASSES: frozenset[str] = _names(
    """
    AIAgg AIClassify AIEmbed AIForecast AIGenerate AISimilarity AISummarizeAgg Agg
    AnonymousAggFunc Apply CombinedAggFunc CombinedParameterizedAgg DynamicIdentifier
    FeaturesAtTime GenerateBool GenerateDouble GenerateEmbedding GenerateInt GenerateTable
    GenerateText Generator MLForecast MLTranslate NextValueFor ParameterizedAgg Predict
    ReadCSV ReadParquet Secret Seq1 Seq2 Seq4 Seq8 ToFile VectorSearch
    """
)
"""sqlglot function classes deliberately left off: file and network readers, sequence
advancers, calls to external AI/ML services, dynamic identifiers, generic wrappers."""
